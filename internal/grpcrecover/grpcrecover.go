// Package grpcrecover turns a panic in a gRPC handler into an Internal
// answer, the same on every Aegis server: the caller gets a reference and
// nothing of the server's insides; the log line carries the same reference
// with the panic and its stack, so an operator can match a report to it.
// The server goes on serving.
package grpcrecover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Log keys and message of the record of a recovered panic.
const (
	FieldReference = "reference"
	FieldPanic     = "panic"
	FieldStack     = "stack"
	FieldMethod    = "method"
	MsgPanic       = "panic serving a call"
)

// referenceBytes is the size of a reference: 8 random bytes keep two
// panics apart in any log an operator will search, and stay short enough
// to read out.
const referenceBytes = 8

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
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}

	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

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
	ref := r.reference()
	method, _ := grpc.Method(ctx)
	r.cfg.Logger.ErrorContext(ctx, MsgPanic,
		slog.String(FieldReference, ref), slog.String(FieldMethod, method),
		slog.String(FieldPanic, fmt.Sprint(p)), slog.String(FieldStack, string(debug.Stack())))

	return status.Errorf(codes.Internal, "%s: internal error (reference %s)", r.cfg.Component, ref)
}

// reference is a random identifier; without randomness the answer still
// goes out, marked so.
func (r *Recovery) reference() string {
	b := make([]byte, referenceBytes)
	if _, err := io.ReadFull(r.cfg.Rand, b); err != nil {
		return "unavailable"
	}

	return hex.EncodeToString(b)
}
