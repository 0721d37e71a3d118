package connlimit

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/clock"
)

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestStatsHandlerKeepsConnectionsThatCall runs a real gRPC server: at the
// FirstCall deadline, the connection that made a call stays open and the
// one that only sent the HTTP/2 preface is closed.
func TestStatsHandlerKeepsConnectionsThatCall(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l := newLimiter(t, 10, 100, clk)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	srv := grpc.NewServer(grpc.StatsHandler(l.StatsHandler()))
	healthpb.RegisterHealthServer(srv, health.NewServer())

	go srv.Serve(l.Wrap(inner)) //nolint:errcheck // ends with Stop

	defer srv.Stop()

	// Connected (TLS would be done here), HTTP/2 preface sent, no call.
	idle := dial(t, inner.Addr().String())
	idle.Connect()

	for idle.GetState().String() != "READY" {
		if !idle.WaitForStateChange(ctx, idle.GetState()) {
			t.Fatal("never connected")
		}
	}

	// The idle connection's timer, armed before the caller connects.
	if err = clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	caller := dial(t, inner.Addr().String())
	if _, err = healthpb.NewHealthClient(caller).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	clk.Advance(5 * time.Second)

	if !idle.WaitForStateChange(ctx, idle.GetState()) {
		t.Fatal("the connection without a call was not closed")
	}

	if got := l.Stats(); got.Expired != 1 || got.Open != 1 {
		t.Fatalf("stats %+v, want 1 expired and 1 open", got)
	}

	if _, err = healthpb.NewHealthClient(caller).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("the connection that made a call: %v", err)
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()

	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() })

	return c
}

// closingHealth is a health server that keeps the Closing context of each
// call.
type closingHealth struct {
	healthpb.UnimplementedHealthServer

	got chan context.Context
}

func (h closingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	closing, ok := Closing(ctx)
	if !ok {
		closing = nil
	}

	h.got <- closing

	return &healthpb.HealthCheckResponse{}, nil
}

// TestClosing runs a real gRPC server: the context Closing gives a call is
// the connection's, one for every call on it, and ends when the client
// closes the connection; a call on a connection the limiter did not admit
// gets none.
func TestClosing(t *testing.T) {
	l := newLimiter(t, 10, 100, clock.NewFake(time.Now()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	h := closingHealth{got: make(chan context.Context, 4)}
	srv := grpc.NewServer(grpc.StatsHandler(l.StatsHandler()))
	healthpb.RegisterHealthServer(srv, h)

	go srv.Serve(l.Wrap(inner)) //nolint:errcheck // ends with Stop

	defer srv.Stop()

	caller := dial(t, inner.Addr().String())

	for range 2 {
		if _, err = healthpb.NewHealthClient(caller).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}

	first, second := <-h.got, <-h.got
	if first == nil || first != second {
		t.Fatalf("Closing gave %v and %v, want one context for the connection", first, second)
	}

	if first.Err() != nil {
		t.Fatal("done while the connection is open")
	}

	if err := caller.Close(); err != nil {
		t.Fatal(err)
	}

	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("not done after the client closed the connection")
	}

	if _, ok := Closing(context.Background()); ok {
		t.Fatal("a context without a connection has one")
	}
}
