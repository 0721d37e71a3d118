package trustd_test

import (
	"crypto/tls"
	"testing"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestCertificateSendsNoPing: Certificate calls made one after the other
// cost the server no PING of its own. gRPC's bandwidth estimator would
// ping the client on the first request data after each answered ping, a
// record out and one in on every call; trustd's fixed flow-control window
// turns it off.
func TestCertificateSendsNoPing(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	var pings h2ping.Counter

	conn, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(pings.Credentials(credentials.NewTLS(&tls.Config{
		RootCAs: env.CAs.Pool(), ServerName: trustdtest.ListenIP, MinVersion: tls.VersionTLS13,
	}))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	sc := securityapi.NewSecurityServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), wire.MetadataToken, trustdtest.StaticToken)

	for range 5 {
		if _, err = sc.Certificate(ctx, &securityapi.CertificateRequest{Csr: csr}); err != nil {
			t.Fatalf("Certificate: %v", err)
		}
	}

	if got, err := pings.Pings(); got != 0 || err != nil {
		t.Fatalf("trustd sent %d pings over 5 calls (frames read: %v)", got, err)
	}
}
