package authz

import (
	"context"
	"errors"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkFunc is one step of the chain: it sees the call's context and method
// and returns the context the rest of the chain runs with, or a refusal.
type checkFunc func(ctx context.Context, method string) (context.Context, error)

// unaryInterceptor runs check before the handler and hands the handler the
// context check returns. Unlike go-grpc-middleware's auth interceptor, it
// offers the service no hook to replace the check.
func unaryInterceptor(check checkFunc) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}

		return handler(ctx, req)
	}
}

// streamInterceptor is unaryInterceptor for streams: a stream is checked
// once, when it opens, exactly like a unary call.
func streamInterceptor(check checkFunc) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}

		wrapped := middleware.WrapServerStream(ss)
		wrapped.WrappedContext = ctx

		return handler(srv, wrapped)
	}
}

// grpcError maps the package's errors to gRPC statuses. The interceptors are
// the API boundary, so this is the only place codes are chosen.
func grpcError(err error) error {
	var denied *DeniedError

	switch {
	case errors.Is(err, ErrRevoked):
		// Said as it is: the holder of a revoked certificate learns why
		// every call fails, and nothing else.
		return status.Error(codes.Unauthenticated, ErrRevoked.Error())
	case errors.As(err, &denied), errors.Is(err, ErrCallerNotAllowed):
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
