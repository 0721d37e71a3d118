package membership

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/internal/wire"
)

// Sender sends a worker's heartbeats to the control planes' trustd, one
// endpoint after the other until one records it.
type Sender struct {
	// Endpoints are the control planes (host or host:port; trustd's port
	// by default).
	Endpoints []string
	// Certificate is the node's server certificate, presented as the
	// client certificate: it proves the entry's addresses are the node's.
	Certificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// AcceptedCAs verify trustd's certificate.
	AcceptedCAs func() *x509.CertPool
}

// Send records m through the first control plane that takes it.
func (s Sender) Send(ctx context.Context, m *Member) error {
	return s.first(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		_, err := c.Heartbeat(ctx, &membership.HeartbeatRequest{Member: m})

		return err
	})
}

// Leave removes the node's entry, whose first address is address, through
// the first control plane that takes it.
func (s Sender) Leave(ctx context.Context, address string) error {
	return s.first(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		_, err := c.Leave(ctx, &membership.LeaveRequest{Address: address})

		return err
	})
}

// first makes call on one control plane after the other until one answers
// without error.
func (s Sender) first(ctx context.Context, call func(context.Context, membership.MembershipServiceClient) error) error {
	if len(s.Endpoints) == 0 {
		return errors.New("membership: no control-plane endpoint to send heartbeats to")
	}

	var errs []error

	for _, ep := range s.Endpoints {
		err := s.callOn(ctx, wire.WithDefaultPort(ep, wire.TrustdPort), call)
		if err == nil {
			return nil
		}

		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}

	return errors.Join(errs...)
}

func (s Sender) callOn(ctx context.Context, endpoint string, call func(context.Context, membership.MembershipServiceClient) error) error {
	creds := credentials.NewTLS(&tls.Config{
		RootCAs: s.AcceptedCAs(), GetClientCertificate: s.Certificate, MinVersion: tls.VersionTLS13,
	})

	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	return call(ctx, membership.NewMembershipServiceClient(conn))
}
