package join_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// answering answers every Certificate call with the same response.
type answering struct {
	securityapi.UnimplementedSecurityServiceServer

	resp *securityapi.CertificateResponse
}

func (a answering) Certificate(context.Context, *securityapi.CertificateRequest) (*securityapi.CertificateResponse, error) {
	return a.resp, nil
}

// TestCertificateSendsNoPing: a join's call costs trustd no PING from the
// client. gRPC's bandwidth estimator would ping the server on the first
// response data of a connection and after each answered ping: a record in
// and one out for trustd on every join, each on a new connection; the
// transport's fixed flow-control windows turn it off.
func TestCertificateSendsNoPing(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, time.Now())
	pair := trustdtest.ServerKeyPair(t, authority, trustdtest.ListenIP)

	var pings h2ping.Counter

	srv := grpc.NewServer(grpc.Creds(pings.ServerCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, GetCertificate: pair.GetCertificate,
	}))))
	securityapi.RegisterSecurityServiceServer(srv, answering{resp: &securityapi.CertificateResponse{
		Ca: authority.CertPEM, Crt: authority.CertPEM,
	}})

	lis, err := net.Listen("tcp", net.JoinHostPort(trustdtest.ListenIP, "0"))
	if err != nil {
		t.Fatal(err)
	}

	go func() { _ = srv.Serve(lis) }()

	t.Cleanup(srv.Stop)

	cas, err := ca.NewAcceptedSet(time.Now(), authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	tok, err := token.Parse(trustdtest.StaticToken)
	if err != nil {
		t.Fatal(err)
	}

	tr := join.GRPCTransport{CAs: cas}

	for range 5 {
		if _, _, err := tr.Certificate(t.Context(), lis.Addr().String(), tok, []byte("csr")); err != nil {
			t.Fatalf("Certificate: %v", err)
		}
	}

	// The transport closes each connection once its answer is in, so a
	// PING would already have been written; let the server read the last.
	srv.GracefulStop()

	if got, err := pings.Pings(); got != 0 || err != nil {
		t.Fatalf("the client sent %d pings over 5 joins (frames read: %v)", got, err)
	}
}
