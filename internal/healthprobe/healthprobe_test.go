package healthprobe_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/healthprobe"
)

const version = "/machine.MachineService/Version"

var check = healthpb.Health_Check_FullMethodName

// stream is a server stream with nothing but a context.
type stream struct{ grpc.ServerStream }

func (stream) Context() context.Context { return context.Background() }

// TestOnlyHealthSkips: the wrapped interceptors run for every method but
// the health service's, unary and streamed, and the call goes on either
// way.
func TestOnlyHealthSkips(t *testing.T) {
	for _, tt := range []struct {
		method string
		runs   bool
	}{{check, false}, {version, true}, {"/grpc.health.v1.HealthX/Check", true}} {
		ran, handled := 0, 0
		unary := healthprobe.Unary(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ran++

			return h(ctx, req)
		})
		streamed := healthprobe.Stream(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ran++

			return h(srv, ss)
		})

		_, _ = unary[0](context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: tt.method}, func(context.Context, any) (any, error) {
			handled++

			return nil, nil
		})
		_ = streamed[0](nil, stream{}, &grpc.StreamServerInfo{FullMethod: tt.method}, func(any, grpc.ServerStream) error {
			handled++

			return nil
		})

		if want := map[bool]int{true: 2, false: 0}[tt.runs]; ran != want || handled != 2 {
			t.Errorf("%s: interceptor ran %d times (want %d), handler %d (want 2)", tt.method, ran, want, handled)
		}
	}
}

// TestNoAllocation: the check runs for every interceptor of every call,
// so it costs no allocation.
func TestNoAllocation(t *testing.T) {
	unary := healthprobe.Unary(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	})
	info := &grpc.UnaryServerInfo{FullMethod: version}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()

	if n := testing.AllocsPerRun(100, func() { _, _ = unary[0](ctx, nil, info, handler) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}
