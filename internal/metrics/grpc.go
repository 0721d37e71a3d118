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
	m   *grpcprom.ServerMetrics
	cfg GRPCConfig
}

// GRPCConfig says what a server knows of its methods. Both fields may be nil.
type GRPCConfig struct {
	// Known tells the methods that keep their own label; nil means every
	// method reaching the interceptor, which is right for a server without
	// an unknown-service handler (gRPC answers unknown methods before any
	// interceptor runs).
	Known func(fullMethod string) bool
	// Kind tells whether a method streams requests and replies, for a
	// server that serves every method as a stream (apid's proxy): its
	// grpc_type label is then the method's, not bidi_stream. Nil takes
	// what gRPC says.
	Kind func(fullMethod string) (clientStream, serverStream bool)
}

// latencyBuckets reach from a cached answer (a millisecond) to a signing
// under load or a fan-out to slow nodes (tens of seconds).
func latencyBuckets() []float64 { return []float64{0.001, 0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30} }

// NewGRPC registers a server's gRPC metrics with reg; nil reg returns nil.
func NewGRPC(reg prometheus.Registerer, cfg GRPCConfig) (*GRPC, error) {
	if reg == nil {
		return nil, nil
	}

	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets())))
	if err := reg.Register(m); err != nil {
		return nil, err
	}

	return &GRPC{m: m, cfg: cfg}, nil
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
	inner, unary := g.m.StreamServerInterceptor(), g.m.UnaryServerInterceptor()

	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		labelled := &grpc.StreamServerInfo{FullMethod: g.label(info.FullMethod), IsClientStream: info.IsClientStream, IsServerStream: info.IsServerStream}
		if g.cfg.Kind != nil {
			labelled.IsClientStream, labelled.IsServerStream = g.cfg.Kind(info.FullMethod)
		}

		if labelled.IsClientStream || labelled.IsServerStream {
			return inner(srv, ss, labelled, h)
		}

		// A unary method served as a stream is counted as the unary call
		// it is.
		_, err := unary(ss.Context(), nil, &grpc.UnaryServerInfo{FullMethod: labelled.FullMethod}, func(ctx context.Context, _ any) (any, error) {
			return nil, h(srv, contextStream{ServerStream: ss, ctx: ctx})
		})

		return err
	}
}

// contextStream is a stream with the context an interceptor made.
type contextStream struct {
	grpc.ServerStream

	ctx context.Context
}

func (c contextStream) Context() context.Context { return c.ctx }

func (g *GRPC) label(fullMethod string) string {
	if g.cfg.Known == nil || g.cfg.Known(fullMethod) {
		return fullMethod
	}

	return UnknownMethod
}
