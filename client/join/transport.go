package join

import (
	"context"
	"crypto/tls"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// GRPCTransport calls trustd's SecurityService over TLS, verifying the
// server certificate against CAs (and its name against the endpoint's host),
// with the token in the "token" metadata key.
type GRPCTransport struct {
	CAs *ca.AcceptedSet
	// Source is the local address to call from; empty lets the system
	// choose.
	Source string
}

// Certificate implements Transport. Each call has its own connection: a
// node joins or renews once in hours, so nothing is gained by keeping one.
func (t GRPCTransport) Certificate(ctx context.Context, endpoint string, tok token.Token, csrPEM []byte) ([]byte, []byte, error) {
	creds := credentials.NewTLS(&tls.Config{RootCAs: t.CAs.Pool(), MinVersion: tls.VersionTLS13})

	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpcopt.DialFrom(t.Source), grpcopt.NoReadBuffer(), grpcopt.SmallWriteBuffer()}, grpcopt.FixedWindows()...)

	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()

	ctx = metadata.AppendToOutgoingContext(ctx, wire.MetadataToken, tok.Reveal())

	resp, err := securityapi.NewSecurityServiceClient(conn).Certificate(ctx, &securityapi.CertificateRequest{Csr: csrPEM})
	if err != nil {
		return nil, nil, err
	}

	return resp.GetCa(), resp.GetCrt(), nil
}
