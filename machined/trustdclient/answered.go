package trustdclient

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// A unary call that fails either was answered by its control plane, which
// sent the call's status in its trailers (a refusal: etcd slow or without
// a leader for a moment, the control plane too busy), or failed on the
// way (no connection, a connection that broke). Both come back as the same
// codes; only the first says the control plane is up, so only the first
// may keep a node with it (SlowFor).

// answeredKey keys the flag a call's context carries (withAnswer).
type answeredKey struct{}

// withAnswer returns ctx carrying a flag that the unary calls made with it
// set when their control plane sent their status (noteAnswer).
func withAnswer(ctx context.Context) (context.Context, *atomic.Bool) {
	flag := &atomic.Bool{}

	return context.WithValue(ctx, answeredKey{}, flag), flag
}

// noteAnswer is the unary interceptor of a Client's connections: when a
// call fails and its trailers came, it sets the flag of the call's context.
func noteAnswer(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	flag, _ := ctx.Value(answeredKey{}).(*atomic.Bool)
	if flag == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}

	var trailer metadata.MD

	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
	if err != nil && trailer != nil {
		flag.Store(true)
	}

	return err
}
