// Package grpcrecover turns a panic in a gRPC handler into an Internal
// answer, the same on every Aegis server: the caller gets a reference and
// nothing of the server's insides; the log line carries the same reference
// with the panic and its stack, so an operator can match a report to it.
// The server goes on serving.
package grpcrecover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// MsgPanic is the message of the record of a recovered panic.
const MsgPanic = "panic serving a call"

// Config of the recovery interceptors.
type Config struct {
	// Component prefixes the answer ("trustd: internal error ...").
	Component string
	// Logger receives the record of each panic.
	Logger *slog.Logger
	// Rand is the source of references; crypto/rand when nil.
	Rand io.Reader
}

// Recovery holds the interceptors built from a Config.
type Recovery struct {
	cfg Config
}

// New builds the interceptors.
func New(cfg Config) *Recovery {
	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Logger = defaults.Logger(cfg.Logger)

	return &Recovery{cfg: cfg}
}

// Unary recovers a panic in a unary call. Put it first in the chain, so
// it also covers the interceptors after it.
func (r *Recovery) Unary() grpc.UnaryServerInterceptor {
	return recovery.UnaryServerInterceptor(recovery.WithRecoveryHandlerContext(r.recovered))
}

// Stream recovers a panic in a stream, as Unary does.
func (r *Recovery) Stream() grpc.StreamServerInterceptor {
	return recovery.StreamServerInterceptor(recovery.WithRecoveryHandlerContext(r.recovered))
}

// ServerOptions chains both interceptors; give them before any other
// chained interceptor so they come first.
func (r *Recovery) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(r.Unary()), grpc.ChainStreamInterceptor(r.Stream())}
}

func (r *Recovery) recovered(ctx context.Context, p any) error {
	// The answer reads as every Internal answer of Aegis does, with the
	// reference under the key the other internal errors log it by.
	ref := requestid.New(r.cfg.Rand)
	method, _ := grpc.Method(ctx)
	r.cfg.Logger.ErrorContext(ctx, MsgPanic,
		slog.String(logkey.RequestID, ref), slog.String(logkey.Method, method),
		slog.String(logkey.Panic, fmt.Sprint(p)), slog.String(logkey.Stack, string(debug.Stack())))

	return status.Errorf(codes.Internal, "%s: internal error (ref %s)", r.cfg.Component, ref)
}
