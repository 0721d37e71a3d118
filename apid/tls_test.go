package apid_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
)

func TestRefusedClientCertificates(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	other := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})

	tls12 := p.ClientTLS(t, p.Client(t, role.Admin))
	tls12.MinVersion, tls12.MaxVersion = tls.VersionTLS12, tls.VersionTLS12

	fromOther := p.ClientTLS(t, other.Client(t, role.Admin))

	// The client sees a TLS alert or a broken connection, depending on
	// timing; apid's audit record says why.
	tests := []struct {
		name   string
		tls    *tls.Config
		reason string
	}{
		{"certificate from another CA", fromOther, "unknown authority"},
		{"expired certificate", p.ClientTLS(t, p.ExpiredClient(t, role.Admin)), "expired"},
		{"certificate without ClientAuth", p.ClientTLS(t, p.Server(t, "127.0.2.99")), "incompatible key usage"},
		{"certificate without any extended key usage", p.ClientTLS(t, p.NoUsageClient(t, role.Admin)), "lacks the ClientAuth"},
		{"TLS 1.2", tls12, "unsupported versions"},
	}

	// Each case from a source of its own: the first refused handshake of a
	// source in an interval is the one logged in full.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := apidtest.TalosClientFrom(t, node.Addr, fmt.Sprintf("127.0.6.%d", i+1), tt.tls)

			_, err := c.Version(testCtx(t))
			if err == nil {
				t.Fatal("call accepted")
			}

			if status.Code(err) != codes.Unavailable {
				t.Fatalf("refused with %v, want Unavailable", err)
			}

			if !logged(t, &sink, "tls handshake refused", tt.reason) {
				t.Fatalf("no handshake refusal logged with %q: %v", tt.reason, sink.Records(t))
			}
		})
	}

	if calls := node.Backend.Calls(); len(calls) != 0 {
		t.Fatalf("refused clients reached machined: %+v", calls)
	}

	// The same node still serves a good client.
	if _, err := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.Client(t, role.Reader))).Version(testCtx(t)); err != nil {
		t.Fatalf("good client refused: %v", err)
	}
}

// logged waits until a record with message msg has an error field
// containing reason: the server writes it once its side of the handshake
// ends, which may be after the client has given up.
func logged(t *testing.T, sink *logtest.Sink, msg, reason string) bool {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	return sink.Wait(ctx, func() bool {
		for _, r := range sink.Find(t, msg) {
			if e, _ := r[logkey.Error].(string); strings.Contains(e, reason) {
				return true
			}
		}

		return false
	}) == nil
}

// countingDialer counts the connections a client opens.
type countingDialer struct{ n atomic.Int32 }

func (d *countingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.n.Add(1)

	var nd net.Dialer

	return nd.DialContext(ctx, "tcp", addr)
}

func TestServerCertificateRenewalKeepsConnections(t *testing.T) {
	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})

	var (
		dialer countingDialer
		seen   atomic.Pointer[x509.Certificate]
	)

	cfg := p.ClientTLS(t, p.Client(t, role.Admin))
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		seen.Store(cs.PeerCertificates[0])

		return nil
	}

	c, err := client.New(context.Background(), client.WithEndpoints(node.Addr), client.WithTLSConfig(cfg),
		client.WithGRPCDialOptions(grpc.WithContextDialer(dialer.dial)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck

	if _, err := c.Version(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	first := seen.Load()
	renewed := p.Server(t, testIP)

	if err := node.Certificate.Set(renewed.CertPEM, renewed.KeyPEM); err != nil {
		t.Fatal(err)
	}

	if _, err := c.Version(testCtx(t)); err != nil {
		t.Fatalf("call after renewal: %v", err)
	}

	if dialer.n.Load() != 1 || !seen.Load().Equal(first) {
		t.Fatalf("renewal dropped the connection (%d dials)", dialer.n.Load())
	}

	fresh := p.ClientTLS(t, p.Client(t, role.Admin))
	fresh.VerifyConnection = cfg.VerifyConnection

	if _, err := apidtest.TalosClient(t, node.Addr, fresh).Version(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	if !seen.Load().Equal(renewed.Cert) {
		t.Fatal("a new connection did not get the renewed certificate")
	}
}

func TestCARotationWithoutRestart(t *testing.T) {
	oldPKI, newPKI := apidtest.NewPKI(t), apidtest.NewPKI(t)

	var current atomic.Pointer[ca.AcceptedSet]

	current.Store(oldPKI.Accepted(t))
	node := apidtest.StartNode(t, oldPKI, apidtest.NodeConfig{IP: testIP, AcceptedCAs: current.Load})

	// Clients trust the node's server certificate, still from the old CA.
	newClient := oldPKI.ClientTLS(t, newPKI.Client(t, role.Reader))
	oldClient := oldPKI.ClientTLS(t, oldPKI.Client(t, role.Reader))

	call := func(cfg *tls.Config) error {
		_, err := apidtest.TalosClient(t, node.Addr, cfg).Version(testCtx(t))

		return err
	}

	if call(newClient) == nil {
		t.Fatal("new CA accepted before the rotation")
	}

	overlap, err := ca.NewAcceptedSet(time.Now(), oldPKI.CA.Cert, newPKI.CA.Cert)
	if err != nil {
		t.Fatal(err)
	}

	current.Store(overlap)

	if err := call(newClient); err != nil {
		t.Fatalf("new CA refused during the overlap: %v", err)
	}

	if err := call(oldClient); err != nil {
		t.Fatalf("old CA refused during the overlap: %v", err)
	}

	current.Store(newPKI.Accepted(t))

	if call(oldClient) == nil {
		t.Fatal("old CA accepted after the rotation")
	}
}

// TestPortProbeIsNotARefusal: a connection closed before its ClientHello
// (a health check's TCP probe) is no refused client: nothing is logged at
// warning level, while a real refusal still is.
func TestPortProbeIsNotARefusal(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})

	for range 3 {
		conn, err := net.Dial("tcp", node.Addr)
		if err != nil {
			t.Fatal(err)
		}

		conn.Close()
	}

	// A refused client afterwards: once its record is there, the probes'
	// handshakes are long over.
	_, _ = apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.ExpiredClient(t, role.Admin))).Version(testCtx(t))

	if !logged(t, &sink, "tls handshake refused", "expired") {
		t.Fatal("the refused client was not logged")
	}

	if n := len(sink.Find(t, "tls handshake refused")); n != 1 {
		t.Fatalf("%d handshake refusals logged, want only the client's: %v", n, sink.Records(t))
	}
}

// TestSilentConnectionIsClosed: a connection that never sends a ClientHello
// is closed once the handshake bound passes (gRPC's default kept it two
// minutes), and that is no refused client either.
func TestSilentConnectionIsClosed(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})

	conn, err := net.Dial("tcp", node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Well under the old two minutes, well over the bound.
	if err = conn.SetReadDeadline(time.Now().Add(apid.HandshakeTimeout + time.Minute)); err != nil {
		t.Fatal(err)
	}

	if _, err = conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from a silent connection: %v, want EOF (closed by apid)", err)
	}

	if recs := sink.Find(t, "tls handshake refused"); len(recs) != 0 {
		t.Fatalf("a silent connection logged as a refused client: %v", recs)
	}
}
