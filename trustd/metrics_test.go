package trustd_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// Each decision moves its series: refusals by reason, issuances, the
// gate; the gRPC series count the same calls by code.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := trustdtest.Start(t, trustdtest.Options{Metrics: reg})
	ctx := testContext(t)
	client := env.Client(t, "")
	good := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	if v := metricstest.Gather(t, reg).Must(t, metrics.TrustdTimeSynced); v != 0 {
		t.Fatalf("gate closed: %s = %v", metrics.TrustdTimeSynced, v)
	}

	_, _ = trustdtest.Call(ctx, client, "zzzzzz.0123456789abcdef", good)
	_, _ = trustdtest.Call(ctx, client, trustdtest.StaticToken, good)

	env.Gate.Set(true)

	if _, err := trustdtest.Call(ctx, client, trustdtest.StaticToken, good); err != nil {
		t.Fatal(err)
	}

	_, _ = trustdtest.Call(ctx, client, trustdtest.StaticToken, []byte("junk"))

	fams := metricstest.Gather(t, reg)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.TrustdTimeSynced, nil, 1},
		{metrics.TrustdIssued, nil, 1},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, trustd.TokenKindStatic, metrics.LabelOutcome, "issued"}, 1},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, trustd.TokenKindStatic, metrics.LabelOutcome, "time_not_synced"}, 1},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, trustd.TokenKindStatic, metrics.LabelOutcome, "bad_request"}, 1},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, "none", metrics.LabelOutcome, "invalid_token"}, 1},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, trustd.TokenKindStored, metrics.LabelOutcome, "issued"}, 0},
		{metrics.TrustdRefused, []string{metrics.LabelReason, "invalid_token"}, 1},
		{metrics.TrustdRefused, []string{metrics.LabelReason, "time_not_synced"}, 1},
		{metrics.TrustdRefused, []string{metrics.LabelReason, "bad_request"}, 1},
		{metrics.TrustdRefused, []string{metrics.LabelReason, "rate_limited"}, 0},
		{"grpc_server_handled_total", []string{"grpc_method", "Certificate", "grpc_code", "OK"}, 1},
		{"grpc_server_handled_total", []string{"grpc_method", "Certificate", "grpc_code", "Unauthenticated"}, 1},
		{metrics.ConnectionsLimit, []string{metrics.LabelScope, "total"}, trustd.MaxConnections},
	} {
		if got := fams.Must(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// The server certificate and the CA are reported with their NotAfter.
	serverEnd := env.KeyPair.Certificate().Leaf.NotAfter
	if got := fams.Must(t, metrics.CertificateNotAfter, metrics.LabelCertificate, "server"); got != float64(serverEnd.Unix()) {
		t.Errorf("server certificate NotAfter = %v, want %v", got, serverEnd.Unix())
	}

	if got := fams.Must(t, metrics.CertificateNotAfter, metrics.LabelCertificate, "accepted_ca"); time.Unix(int64(got), 0).Before(time.Now().AddDate(5, 0, 0)) {
		t.Errorf("CA NotAfter = %v", got)
	}

}

// A handshake of another protocol is counted as a refused handshake; a
// port probe (connected, closed before a ClientHello) is not.
func TestHandshakeRefusalMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := trustdtest.Start(t, trustdtest.Options{Metrics: reg})
	refused := func() float64 {
		return metricstest.Gather(t, reg).Must(t, metrics.HandshakesRefused, metrics.LabelListener, "trustd", metrics.LabelReason, "handshake")
	}

	if v := refused(); v != 0 {
		t.Fatalf("before any handshake: %v refused", v)
	}

	probe, err := net.Dial("tcp", env.Addr)
	if err != nil {
		t.Fatal(err)
	}

	probe.Close()

	plain, err := net.Dial("tcp", env.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	if _, err = plain.Write([]byte("GET / HTTP/1.1\r\nHost: trustd\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	_ = plain.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, plain) // until trustd closes it

	deadline := time.Now().Add(10 * time.Second)
	for refused() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	// The probe's end may be seen after the refusal: give it time to be
	// (wrongly) counted before the final check.
	time.Sleep(100 * time.Millisecond)

	if v := refused(); v != 1 {
		t.Fatalf("%v refused handshakes, want 1 (the plain HTTP request, not the probe)", v)
	}
}
