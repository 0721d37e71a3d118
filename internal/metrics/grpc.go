package metrics

import (
	"context"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// UnknownMethod is the method label of calls to a method a server does not
// know: a caller chooses the name, so it never becomes a label of its own.
const UnknownMethod = "/unknown/unknown"

// GRPC counts a gRPC server's calls by method and code and times them
// (go-grpc-middleware's grpc_server_* series). A nil *GRPC does nothing.
type GRPC struct {
	m     *grpcprom.ServerMetrics
	known func(fullMethod string) bool
}

// latencyBuckets reach from a cached answer (a millisecond) to a signing
// under load or a fan-out to slow nodes (tens of seconds).
var latencyBuckets = []float64{0.001, 0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30}

// NewGRPC registers a server's gRPC metrics with reg; nil reg returns nil.
// known tells the methods that keep their own label; nil means every
// method reaching the interceptor, which is right for a server without an
// unknown-service handler (gRPC answers unknown methods before any
// interceptor runs).
func NewGRPC(reg prometheus.Registerer, known func(fullMethod string) bool) (*GRPC, error) {
	if reg == nil {
		return nil, nil
	}

	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	if err := reg.Register(m); err != nil {
		return nil, err
	}

	return &GRPC{m: m, known: known}, nil
}

// ServerOptions chains the interceptors; give them first, before the
// recovery ones, so that a recovered panic counts as the Internal its
// caller got and a refusal by authorization counts too.
func (g *GRPC) ServerOptions() []grpc.ServerOption {
	if g == nil {
		return nil
	}

	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.Unary()), grpc.ChainStreamInterceptor(g.Stream())}
}

// Unary is the unary interceptor.
func (g *GRPC) Unary() grpc.UnaryServerInterceptor {
	inner := g.m.UnaryServerInterceptor()

	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if m := g.label(info.FullMethod); m != info.FullMethod {
			info = &grpc.UnaryServerInfo{Server: info.Server, FullMethod: m}
		}

		return inner(ctx, req, info, h)
	}
}

// Stream is the stream interceptor.
func (g *GRPC) Stream() grpc.StreamServerInterceptor {
	inner := g.m.StreamServerInterceptor()

	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if m := g.label(info.FullMethod); m != info.FullMethod {
			info = &grpc.StreamServerInfo{FullMethod: m, IsClientStream: info.IsClientStream, IsServerStream: info.IsServerStream}
		}

		return inner(srv, ss, info, h)
	}
}

func (g *GRPC) label(fullMethod string) string {
	if g.known == nil || g.known(fullMethod) {
		return fullMethod
	}

	return UnknownMethod
}
