// Package healthprobe lets a supervisor or load balancer probe an Aegis
// server with grpc.health.v1 without credentials: the health service, and
// it alone, skips the interceptors that authenticate and authorize.
package healthprobe

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// servicePrefix starts the full method names of the health service
// (Check, List, Watch).
var servicePrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

// IsHealth reports whether a full method name is of the health service.
func IsHealth(fullMethod string) bool { return strings.HasPrefix(fullMethod, servicePrefix) }

// Unary wraps each interceptor so that it runs for every method but the
// health service's. The method name gRPC gives is compared as it is: the
// check runs at every call of every interceptor, so it allocates nothing.
func Unary(in ...grpc.UnaryServerInterceptor) []grpc.UnaryServerInterceptor {
	out := make([]grpc.UnaryServerInterceptor, len(in))
	for i, u := range in {
		out[i] = func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if IsHealth(info.FullMethod) {
				return handler(ctx, req)
			}

			return u(ctx, req, info, handler)
		}
	}

	return out
}

// Stream is Unary for streams (the health service's Watch).
func Stream(in ...grpc.StreamServerInterceptor) []grpc.StreamServerInterceptor {
	out := make([]grpc.StreamServerInterceptor, len(in))
	for i, s := range in {
		out[i] = func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if IsHealth(info.FullMethod) {
				return handler(srv, ss)
			}

			return s(srv, ss, info, handler)
		}
	}

	return out
}
