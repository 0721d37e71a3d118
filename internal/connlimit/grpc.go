package connlimit

import (
	"context"
	"net"

	"google.golang.org/grpc/stats"
)

// StatsHandler tells l when a connection starts a call, so that it is no
// longer closed for making none. Give it to the gRPC server serving l's
// listeners (grpc.StatsHandler); it observes nothing else.
func (l *Limiter) StatsHandler() stats.Handler { return statsHandler{l: l} }

type statsHandler struct{ l *Limiter }

type connContextKey struct{}

// TagConn finds the connection in l's table once, so that each call finds
// it in its context.
func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c := h.l.lookup(info.RemoteAddr, info.LocalAddr); c != nil {
		return context.WithValue(ctx, connContextKey{}, c)
	}

	return ctx
}

// TagRPC runs as a call arrives on the connection.
func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if c, ok := ctx.Value(connContextKey{}).(*conn); ok {
		c.markCalled()
	}

	return ctx
}

func (statsHandler) HandleRPC(context.Context, stats.RPCStats) {}

func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

// MarkCalled tells l that a connection it admitted started a call, for a
// server that is not gRPC (an HTTP server's ConnState hook, on
// http.StateActive). A connection l did not admit is ignored.
func (l *Limiter) MarkCalled(c net.Conn) {
	if cc, ok := c.(*conn); ok && cc.l == l {
		cc.markCalled()
	}
}

// Closing returns a context that is done once the connection a call
// arrived on is closed, whoever closes it (the client, gRPC's keepalive,
// or the limiter), for what a server keeps for as long as a connection
// stays open. It needs the Limiter's StatsHandler on the server; ok is
// false for a call on a connection no Limiter admitted. Closing costs the
// connection a context, made on the first call that asks.
func Closing(ctx context.Context) (closing context.Context, ok bool) {
	c, ok := ctx.Value(connContextKey{}).(*conn)
	if !ok {
		return nil, false
	}

	return c.context(), true
}
