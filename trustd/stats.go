package trustd

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/aegis-os/aegis/authz"
)

// tap runs when a call's headers arrive, before its message is read: a
// source over its failure limit is refused here, before any other work.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != certificateMethod {
		return ctx, nil
	}

	c := callerOf(ctx)
	if s.limiter.allowed(c.addr) {
		return ctx, nil
	}

	rec := s.newAuditRecord(c)
	if tok, err := tokenFromMetadata(info.Header); err == nil {
		rec.tokenID = tok.ID()
	}

	s.auditRefused(ctx, &rec, ErrRateLimited, codes.ResourceExhausted)

	return ctx, toStatus(ErrRateLimited, "")
}

// decidedKey marks, in a Certificate call's context, whether the handler
// ran and so wrote the call's audit record.
type decidedKey struct{}

func markDecided(ctx context.Context) {
	if d, ok := ctx.Value(decidedKey{}).(*atomic.Bool); ok {
		d.Store(true)
	}
}

// auditStats audits Certificate calls that gRPC refused before the handler
// ran: a message over MaxRequestSize, or one that does not decode. Without
// it such a call would leave no record.
type auditStats struct{ s *Server }

func (a auditStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if info.FullMethodName != certificateMethod {
		return ctx
	}

	return context.WithValue(ctx, decidedKey{}, new(atomic.Bool))
}

func (a auditStats) HandleRPC(ctx context.Context, st stats.RPCStats) {
	end, ok := st.(*stats.End)
	if !ok || end.Error == nil {
		return
	}

	d, ok := ctx.Value(decidedKey{}).(*atomic.Bool)
	if !ok || d.Load() {
		return
	}

	c := callerOf(ctx)
	code := status.Code(end.Error)

	// A caller that gives up is not at fault; a caller that sends what
	// gRPC cannot take is, like one that sends a bad CSR.
	if code != codes.Canceled && code != codes.DeadlineExceeded {
		a.s.limiter.fail(c.addr)
	}

	rec := a.s.newAuditRecord(c)
	a.s.auditRefused(ctx, &rec, end.Error, code)
}

// TagConn works out the connection's caller once, for all its calls, and
// gives the connection a memo of its node certificate's verification: a
// node's heartbeats on one connection verify its chain once
// (authz.NodeCertificate).
func (auditStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return authz.ContextWithConnMemo(context.WithValue(ctx, callerKey{}, newCaller(addrOf(info.RemoteAddr))))
}

func (auditStats) HandleConn(context.Context, stats.ConnStats) {}
