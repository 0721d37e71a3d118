package trustdclient

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// A unary call that fails either was answered by its control plane, which
// sent the call's status (a refusal: etcd slow or without a leader for a
// moment, the control plane too busy), or failed on the way (no
// connection, a connection that broke). Both come back as the same codes;
// only the first says the control plane is up, so only the first may keep
// a node with it (SlowFor). gRPC tells them apart only to a stats handler:
// the trailers that carry a status the server sent (stats.InTrailer). The
// trailers a call option collects cannot: they read as empty, not absent,
// when the connection broke. Streams are left out: one that a control
// plane ends as it stops moves its node, as before.

// answeredKey keys the answer a call's context carries (withAnswer).
type answeredKey struct{}

// answer is what answerStats saw of one call.
type answer struct {
	stream   atomic.Bool // the call is a stream
	answered atomic.Bool // a unary call's status came from its control plane
}

// withAnswer returns ctx carrying an answer that answerStats fills in for
// the calls made with it.
func withAnswer(ctx context.Context) (context.Context, *answer) {
	a := &answer{}

	return context.WithValue(ctx, answeredKey{}, a), a
}

// answerStats is the stats handler of a Client's connections: it records,
// in the answer of a unary call's context, that the call's status came
// from its control plane.
type answerStats struct{}

func (answerStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (answerStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	a, _ := ctx.Value(answeredKey{}).(*answer)
	if a == nil {
		return
	}

	switch s := s.(type) {
	case *stats.Begin:
		a.stream.Store(s.IsClientStream || s.IsServerStream)
	case *stats.InTrailer:
		if !a.stream.Load() {
			a.answered.Store(true)
		}
	}
}

func (answerStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (answerStats) HandleConn(context.Context, stats.ConnStats) {}
