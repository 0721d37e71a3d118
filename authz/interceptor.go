package authz

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkFunc is one step of the chain: it sees the call's context and method
// and returns the context the rest of the chain runs with, or a refusal.
type checkFunc func(ctx context.Context, method string) (context.Context, error)

// unaryInterceptor builds a step on go-grpc-middleware's auth interceptor.
// The library lets a service replace the check with its own
// AuthFuncOverride method; a service must never be able to do that to an
// authorization step, so the library is not shown the service.
func unaryInterceptor(check checkFunc) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		inner := auth.UnaryServerInterceptor(func(ctx context.Context) (context.Context, error) {
			return check(ctx, info.FullMethod)
		})

		hidden := *info
		hidden.Server = nil

		return inner(ctx, req, &hidden, handler)
	}
}

// streamInterceptor is unaryInterceptor for streams: a stream is checked
// once, when it opens, exactly like a unary call.
func streamInterceptor(check checkFunc) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		inner := auth.StreamServerInterceptor(func(ctx context.Context) (context.Context, error) {
			return check(ctx, info.FullMethod)
		})

		return inner(nil, ss, info, func(_ any, wrapped grpc.ServerStream) error {
			return handler(srv, wrapped)
		})
	}
}

// grpcError maps the package's errors to gRPC statuses. The interceptors are
// the API boundary, so this is the only place codes are chosen.
func grpcError(err error) error {
	var denied *DeniedError

	switch {
	case errors.As(err, &denied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrBadMetadata):
		return status.Error(codes.InvalidArgument, err.Error())
	default:
		// The cause is logged where it happened; the caller learns nothing
		// about the server's configuration.
		return status.Error(codes.Internal, "authz: internal error")
	}
}
