package main

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/internal/logtest"
)

// A panicking handler on the token socket's server answers Internal with
// a reference that is in the log line with the stack, and the next call
// is served.
func TestTokenSocketRecoversPanics(t *testing.T) {
	var logs logtest.Sink

	srv := newTokenServer(tokens.UnimplementedTokenServiceServer{}, nil, logs.Logger())
	recovertest.Register(srv)

	conn := serveOnSocket(t, srv)

	recovertest.Check(t.Context(), t, conn, logs.String)
}

// healthOf registers h as trustd.Server.RegisterHealth does.
type healthOf struct{ h *health.Server }

func (f healthOf) RegisterHealth(r grpc.ServiceRegistrar) { healthpb.RegisterHealthServer(r, f.h) }

// The token socket serves trustd's health statuses, for machined's probe:
// the statuses the listener's health service holds, whatever they are now.
func TestTokenSocketServesHealth(t *testing.T) {
	var logs logtest.Sink

	h := health.NewServer()
	srv := newTokenServer(tokens.UnimplementedTokenServiceServer{}, healthOf{h}, logs.Logger())
	conn := serveOnSocket(t, srv)

	for _, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING} {
		h.SetServingStatus("", want)

		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != want {
			t.Fatalf("health on the token socket: %v, %v; want %v", resp.GetStatus(), err, want)
		}
	}
}

// serveOnSocket serves srv on a Unix socket of the test's until it ends,
// and returns a client connection to it.
func serveOnSocket(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()

	path := filepath.Join(t.TempDir(), "tokens.sock")

	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}

	go func() { _ = srv.Serve(lis) }()

	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	return conn
}
