package metrics_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/connlimit"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/internal/version"
)

func TestCertificates(t *testing.T) {
	reg := prometheus.NewRegistry()
	notAfter := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{SerialNumber: big.NewInt(0xab), NotAfter: notAfter}
	list := []metrics.Certificate{{Name: "server", Cert: cert}, {Name: "accepted_ca", Cert: cert}, {Name: "accepted_ca", Cert: cert}, {Name: "none"}}

	if err := metrics.RegisterCertificates(reg, func() []metrics.Certificate { return list }); err != nil {
		t.Fatal(err)
	}

	want := `# HELP aegis_certificate_not_after_seconds End of a certificate's validity (NotAfter), unix seconds.
# TYPE aegis_certificate_not_after_seconds gauge
aegis_certificate_not_after_seconds{certificate="accepted_ca",serial="ab"} 1.924992e+09
aegis_certificate_not_after_seconds{certificate="server",serial="ab"} 1.924992e+09
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), metrics.CertificateNotAfter); err != nil {
		t.Fatal(err)
	}

	// The time left is read at the scrape: within a minute of the test's
	// own reading.
	left := metricstest.Gather(t, reg).Must(t, metrics.CertificateExpiry, metrics.LabelCertificate, "server")
	if d := left - time.Until(notAfter).Seconds(); d > 1 || d < -60 {
		t.Fatalf("%s = %v, want about %v", metrics.CertificateExpiry, left, time.Until(notAfter).Seconds())
	}

	// A certificate gone (renewed) is gone from the next scrape.
	list = nil
	if n, err := promtest.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("after the list emptied: %d series, %v", n, err)
	}

	if err := metrics.RegisterCertificates(nil, nil); err != nil {
		t.Fatalf("nil registerer: %v", err)
	}
}

// Every daemon's registry says which build it runs.
func TestBuildInfo(t *testing.T) {
	fams := metricstest.Gather(t, metrics.NewRegistry())

	if v := fams.Must(t, metrics.BuildInfo, metrics.LabelTalosAPI, version.TalosAPI,
		metrics.LabelGoVersion, runtime.Version(), metrics.LabelVersion, version.Get().Tag); v != 1 {
		t.Fatalf("%s = %v, want 1", metrics.BuildInfo, v)
	}
}

// Client certificate calls are counted by operation and outcome, every
// series present from the start; a nil registerer counts nothing.
func TestClientCertificates(t *testing.T) {
	reg := prometheus.NewRegistry()

	c, err := metrics.NewClientCertificates(reg)
	if err != nil {
		t.Fatal(err)
	}

	c.Count(metrics.OperationRenew, metrics.OutcomeIssued)
	c.Count(metrics.OperationRenew, metrics.OutcomeIssued)
	c.Count(metrics.OperationGenerate, metrics.OutcomeRefused)

	fams := metricstest.Gather(t, reg)
	for _, w := range []struct {
		op, outcome string
		want        float64
	}{
		{metrics.OperationRenew, metrics.OutcomeIssued, 2},
		{metrics.OperationGenerate, metrics.OutcomeRefused, 1},
		{metrics.OperationGenerate, metrics.OutcomeFailed, 0},
	} {
		if got := fams.Must(t, metrics.ClientCertificates, metrics.LabelOperation, w.op, metrics.LabelOutcome, w.outcome); got != w.want {
			t.Errorf("%s{%s,%s} = %v, want %v", metrics.ClientCertificates, w.op, w.outcome, got, w.want)
		}
	}

	none, err := metrics.NewClientCertificates(nil)
	if err != nil || none != nil {
		t.Fatalf("nil registerer: %v, %v", none, err)
	}

	none.Count(metrics.OperationRenew, metrics.OutcomeIssued)
}

func TestConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := connlimit.Stats{Open: 3, Refused: 2, Evicted: 1}

	if err := metrics.RegisterConnections(reg, func() connlimit.Stats { return st }, 100, 10); err != nil {
		t.Fatal(err)
	}

	want := `# HELP aegis_connections_open Open connections of the API listener.
# TYPE aegis_connections_open gauge
aegis_connections_open 3
# HELP aegis_connections_limit Connection caps of the API listener.
# TYPE aegis_connections_limit gauge
aegis_connections_limit{scope="per_source"} 10
aegis_connections_limit{scope="total"} 100
# HELP aegis_connections_closed_total Connections the limiter closed, by reason.
# TYPE aegis_connections_closed_total counter
aegis_connections_closed_total{reason="evicted"} 1
aegis_connections_closed_total{reason="expired"} 0
aegis_connections_closed_total{reason="refused"} 2
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// Calls are counted by method and code; a method the server does not know
// is counted under one label, whatever its name.
func TestGRPCBoundsMethods(t *testing.T) {
	reg := prometheus.NewRegistry()

	g, err := metrics.NewGRPC(reg, metrics.GRPCConfig{Known: func(m string) bool { return m == "/svc/Known" }})
	if err != nil {
		t.Fatal(err)
	}

	unary := g.Unary()
	fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.PermissionDenied, "no") }
	ok := func(context.Context, any) (any, error) { return struct{}{}, nil }

	for _, call := range []struct {
		method string
		h      grpc.UnaryHandler
	}{
		{"/svc/Known", ok}, {"/svc/Known", fail}, {"/attacker/Name1", ok}, {"/attacker/Name2", fail},
	} {
		_, _ = unary(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: call.method}, call.h)
	}

	want := `# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Known",grpc_service="svc",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="unknown",grpc_service="unknown",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="PermissionDenied",grpc_method="Known",grpc_service="svc",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="PermissionDenied",grpc_method="unknown",grpc_service="unknown",grpc_type="unary"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "grpc_server_handled_total"); err != nil {
		t.Fatal(err)
	}

	if n, err := promtest.GatherAndCount(reg, "grpc_server_handling_seconds"); err != nil || n != 2 {
		t.Fatalf("latency histograms: %d, %v; want one per method label", n, err)
	}

	// A server that serves every method as a stream labels each with its
	// own kind.
	kindReg := prometheus.NewRegistry()
	kinds, _ := metrics.NewGRPC(kindReg, metrics.GRPCConfig{Kind: func(string) (bool, bool) { return false, false }})
	_ = kinds.Stream()(nil, fakeStream{ctx: t.Context()}, &grpc.StreamServerInfo{FullMethod: "/svc/Unary", IsClientStream: true, IsServerStream: true},
		func(any, grpc.ServerStream) error { return nil })

	if v, ok := metricstest.Gather(t, kindReg).Value("grpc_server_handled_total", "grpc_type", "unary", "grpc_method", "Unary"); !ok || v != 1 {
		t.Fatalf("a unary method served as a stream: %v, %v; want counted as unary", v, ok)
	}

	if g, err := metrics.NewGRPC(nil, metrics.GRPCConfig{}); g != nil || err != nil || g.ServerOptions() != nil {
		t.Fatalf("nil registerer: %v, %v", g, err)
	}
}

// The endpoint serves GET /metrics and nothing else.
func TestEndpointServesMetricsOnly(t *testing.T) {
	reg, srv, err := metrics.Open("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)

	go func() { served <- srv.Serve(ctx) }()

	t.Cleanup(func() {
		cancel()

		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "aegis_test_total", Help: "test"}))

	base := "http://" + srv.Addr().String()

	for _, tt := range []struct {
		method, path string
		code         int
		has          string
	}{
		{http.MethodGet, "/metrics", http.StatusOK, "aegis_test_total 0"},
		{http.MethodGet, "/metrics", http.StatusOK, "go_goroutines"},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, ""},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, base+tt.path, nil)

		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}

		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()

		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.has) {
			t.Errorf("%s %s: %d, want %d with %q", tt.method, tt.path, resp.StatusCode, tt.code, tt.has)
		}
	}

	// Connections are bounded per source: one over the cap is closed at
	// once, and the endpoint serves again once the others have gone.
	var idle []net.Conn

	for range metrics.MaxConnectionsPerSource {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}

		idle = append(idle, c)
	}

	over, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))

	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection over the per-source cap: %v, want closed", err)
	}

	for _, c := range idle {
		c.Close()
	}

	waitScrape := func() error {
		for range 100 {
			if _, _, err := metricstest.Scrape(t.Context(), srv.Addr().String()); err == nil {
				return nil
			}

			time.Sleep(10 * time.Millisecond)
		}

		return errors.New("no scrape after the idle connections closed")
	}
	if err := waitScrape(); err != nil {
		t.Fatal(err)
	}

	if r, s, err := metrics.Open("", nil); r != nil || s != nil || err != nil {
		t.Fatalf("Open(\"\") = %v, %v, %v; want metrics off", r, s, err)
	}
}

type fakeStream struct {
	grpc.ServerStream

	ctx context.Context
}

func (f fakeStream) Context() context.Context { return f.ctx }
