package trustdclient

import (
	"context"
	"sync"

	"google.golang.org/grpc/stats"
)

// transports follows the transports (TCP connections) of one kept
// connection, by local address, from gRPC's own events: a stats handler
// of that connection alone.
type transports struct {
	mu   sync.Mutex
	open map[string]bool
}

type transportKey struct{}

func (t *transports) isOpen(local string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()

	return t.open[local]
}

// TagConn names the transport by its local address for HandleConn.
func (t *transports) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if info.LocalAddr == nil {
		return ctx
	}

	return context.WithValue(ctx, transportKey{}, info.LocalAddr.String())
}

// HandleConn records a transport's start and end.
func (t *transports) HandleConn(ctx context.Context, s stats.ConnStats) {
	local, ok := ctx.Value(transportKey{}).(string)
	if !ok {
		return
	}

	t.mu.Lock()
	defer t.mu.Unlock()

	switch s.(type) {
	case *stats.ConnBegin:
		if t.open == nil {
			t.open = map[string]bool{}
		}

		t.open[local] = true
	case *stats.ConnEnd:
		delete(t.open, local)
	}
}

func (*transports) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (*transports) HandleRPC(context.Context, stats.RPCStats) {}
