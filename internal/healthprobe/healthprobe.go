// Package healthprobe lets a supervisor or load balancer probe an Aegis
// server with grpc.health.v1 without credentials: the health service, and
// it alone, skips the interceptors that authenticate and authorize.
package healthprobe

import (
	"context"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// servicePrefix starts the full method names of the health service
// (Check, List, Watch).
var servicePrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

// IsHealth reports whether a full method name is of the health service.
func IsHealth(fullMethod string) bool { return strings.HasPrefix(fullMethod, servicePrefix) }

var notHealth = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
	return !IsHealth(c.FullMethod())
})

// Unary wraps each interceptor so that it runs for every method but the
// health service's.
func Unary(in ...grpc.UnaryServerInterceptor) []grpc.UnaryServerInterceptor {
	out := make([]grpc.UnaryServerInterceptor, len(in))
	for i, u := range in {
		out[i] = selector.UnaryServerInterceptor(u, notHealth)
	}

	return out
}

// Stream is Unary for streams (the health service's Watch).
func Stream(in ...grpc.StreamServerInterceptor) []grpc.StreamServerInterceptor {
	out := make([]grpc.StreamServerInterceptor, len(in))
	for i, s := range in {
		out[i] = selector.StreamServerInterceptor(s, notHealth)
	}

	return out
}
