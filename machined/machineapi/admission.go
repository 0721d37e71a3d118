package machineapi

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/reclaim"
)

// Admission bounds the calls a server runs at once, streams and unary
// calls together, over all its connections: HTTP/2's own bound is per
// connection. A call over the bound is refused at once with
// ResourceExhausted naming it.
type Admission struct {
	limit   int64
	open    atomic.Int64
	reclaim *reclaim.Tracker
}

// NewAdmission returns an Admission of at most limit calls at once.
func NewAdmission(limit int) *Admission {
	return &Admission{limit: int64(limit), reclaim: reclaim.New(ReclaimAfter)}
}

// ServerOptions are the interceptors that apply the bound and, per
// connection, HTTP/2's announcement of it; they go before the others so
// that a refused call costs nothing more.
func (a *Admission) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(a.limit)), //nolint:gosec // a small positive constant
		grpc.ChainUnaryInterceptor(a.unary),
		grpc.ChainStreamInterceptor(a.stream),
	}
}

// Open returns how many calls are open.
func (a *Admission) Open() int { return int(a.open.Load()) }

func (a *Admission) enter() error {
	n := a.open.Add(1)
	if n > a.limit {
		a.open.Add(-1)

		return status.Error(codes.ResourceExhausted, fmt.Sprintf("machined: too many open calls (limit %d)", a.limit))
	}

	a.reclaim.Observe(int(n))

	return nil
}

func (a *Admission) exit() { a.reclaim.Observe(int(a.open.Add(-1))) }

func (a *Admission) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.exit()

	return handler(ctx, req)
}

func (a *Admission) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.exit()

	return handler(srv, ss)
}
