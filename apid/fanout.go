package apid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
)

// errReplyTooLarge is returned when the merged replies of a fan-out exceed
// MaxMessageSize: no client could receive them.
var errReplyTooLarge = errors.New("apid: merged reply exceeds the message size limit")

// fanOut is one `nodes` call: the caller's messages go to every node, and
// every node's replies come back tagged with its name: merged into one
// reply for a unary method, interleaved as they come for a stream. A node's
// failure is an entry of the reply, not a failure of the call.
type fanOut struct {
	s      *Server
	ctx    context.Context
	cancel context.CancelFunc
	method string
	md     metadata.MD
	caller caller
	// secrets, when the call carries them, are refused per node to
	// every node whose proven role does not match.
	secrets   *secretsCall
	streaming bool
	nodes     []*nodeCall
	wg        sync.WaitGroup
	out       chan []byte   // streaming: tagged messages for the caller
	quit      chan struct{} // closed when nobody reads out any more
	callerErr error         // set by feed before it closes the nodes' requests
	fed       chan struct{} // closed when feed is done
}

// nodeCall is one node of a fan-out.
type nodeCall struct {
	target target
	tag    tag
	reqs   chan *frame   // the caller's messages for this node
	gone   chan struct{} // closed when the node takes no more messages
	// replies are the node's tagged replies or its error entry (unary
	// methods only); only the node's goroutine writes them, and they are
	// read once it is done.
	replies [][]byte
}

func (s *Server) fanOut(ss grpc.ServerStream, method string, md metadata.MD, targets []target, c caller, secrets *secretsCall) error {
	ctx, cancel := withMergeReserve(ss.Context())
	defer cancel()

	f := &fanOut{
		s: s, ctx: ctx, cancel: cancel, method: method, md: md, caller: c, secrets: secrets,
		streaming: streamsReplies(method),
		out:       make(chan []byte, StreamBuffer),
		quit:      make(chan struct{}),
		fed:       make(chan struct{}),
	}
	defer close(f.quit)

	for _, t := range targets {
		n := &nodeCall{target: t, tag: newTag(t.name), reqs: make(chan *frame, StreamBuffer), gone: make(chan struct{})}
		f.nodes = append(f.nodes, n)
		f.wg.Go(func() { f.run(n) })
	}

	go f.feed(ss)
	go func() {
		f.wg.Wait()
		close(f.out)
	}()

	if f.streaming {
		return f.stream(ss)
	}

	return f.merge(ss)
}

// withMergeReserve gives the nodes of a fan-out a deadline earlier than
// the caller's (see MergeReserveDivisor), so the reply, with the error
// entries of the nodes that were too slow, reaches the caller in time.
// Deadlines are wall-clock times on the wire, so this reads the real clock.
func withMergeReserve(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}

	reserve := min(max(time.Until(deadline)/MergeReserveDivisor, MinMergeReserve), MaxMergeReserve)

	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// feed reads the caller's messages and hands each to every node still
// taking messages; when the caller half-closes, every node is half-closed.
func (f *fanOut) feed(ss grpc.ServerStream) {
	defer close(f.fed)
	defer func() {
		for _, n := range f.nodes {
			close(n.reqs)
		}
	}()

	for {
		fr := &frame{}
		if err := ss.RecvMsg(fr); err != nil {
			if !errors.Is(err, io.EOF) {
				f.callerErr = err
				f.cancel()
			}

			return
		}

		// Every node sends the same frame, each when it can: a copy of its
		// own lets gRPC have its buffers back now.
		fr.own()

		for _, n := range f.nodes {
			select {
			case n.reqs <- fr:
			case <-n.gone:
			case <-f.ctx.Done():
				return
			}
		}
	}
}

// run makes the call on one node and collects or forwards its replies.
func (f *fanOut) run(n *nodeCall) {
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()

	cs, release, err := f.open(ctx, n)
	if err != nil {
		close(n.gone)
		f.fail(n, err)

		return
	}
	defer release()

	go f.send(n, cs)

	sent := false

	for {
		fr := &frame{}
		if err := cs.RecvMsg(fr); err != nil {
			if !errors.Is(err, io.EOF) {
				f.fail(n, err)
			} else if !sent && !f.streaming {
				// An empty answer still shows which node gave it.
				f.emit(n, appendEntry(nil, n.tag.meta))
			}

			return
		}

		tagged, err := n.tag.reply(fr.bytes(), f.streaming)
		fr.free()

		if err != nil {
			f.fail(n, err)

			return
		}

		if sent = true; !f.emit(n, tagged) {
			return
		}
	}
}

func (f *fanOut) open(ctx context.Context, n *nodeCall) (grpc.ClientStream, func(), error) {
	if n.target.absent != nil {
		return nil, nil, n.target.absent
	}

	if err := f.s.checkSecrets(f.method, f.secrets, n.target); err != nil {
		return nil, nil, err
	}

	conn, release, err := f.s.backend(n.target, f.caller)
	if err != nil {
		return nil, nil, err
	}

	cs, err := f.s.newStream(ctx, conn, n.target.name, f.method, f.md)
	if err != nil {
		release()

		return nil, nil, err
	}

	return cs, release, nil
}

// send passes the caller's messages to one node.
func (f *fanOut) send(n *nodeCall, cs grpc.ClientStream) {
	defer close(n.gone)

	for fr := range n.reqs {
		if err := cs.SendMsg(fr); err != nil {
			// The node ended the call; its status arrives on the reply side.
			return
		}
	}

	_ = cs.CloseSend() // always nil: a half-close cannot fail
}

// fail turns a node's error into its entry in the reply. An unreachable
// node, and one kept from the call's secrets, was logged where it was
// found; a node apid does not know is the caller's mistake or a node
// rejoining, and is not logged.
func (f *fanOut) fail(n *nodeCall, err error) {
	st := status.Convert(f.s.toStatus(f.method, err))
	if st.Code() != codes.Canceled && !errors.As(err, new(*nodeUnreachableError)) && !errors.As(err, new(*wrongRoleError)) &&
		!errors.As(err, new(*notMemberError)) {
		f.s.log.Info("node call failed", slog.String(logkey.Method, f.method), slog.String(logkey.Node, n.target.name),
			slog.String(logkey.Code, st.Code().String()), slog.String(logkey.Error, st.Message()))
	}

	f.emit(n, n.tag.failure(st, f.streaming))
}

// emit hands one tagged message on: to the node's replies for a unary
// method, to the caller for a stream. It reports false once the caller is
// gone.
func (f *fanOut) emit(n *nodeCall, b []byte) bool {
	if !f.streaming {
		n.replies = append(n.replies, b)

		return true
	}

	select {
	case f.out <- b:
		return true
	case <-f.quit:
		return false
	}
}

// stream sends the nodes' messages to the caller as they come.
func (f *fanOut) stream(ss grpc.ServerStream) error {
	for b := range f.out {
		if err := ss.SendMsg(&frame{payload: b}); err != nil {
			return err
		}
	}

	return f.callerError()
}

// merge waits for every node and sends their replies as one, in the order
// the caller named the nodes.
func (f *fanOut) merge(ss grpc.ServerStream) error {
	f.wg.Wait()

	if err := f.callerError(); err != nil {
		return err
	}

	size := 0
	for _, n := range f.nodes {
		for _, r := range n.replies {
			size += len(r)
		}
	}

	if size > MaxMessageSize {
		return errReplyTooLarge
	}

	merged := make([]byte, 0, size)
	for _, n := range f.nodes {
		for _, r := range n.replies {
			merged = append(merged, r...)
		}
	}

	return ss.SendMsg(&frame{payload: merged})
}

// callerError returns the error reading the caller's messages, if feed is
// done and had one: a call whose request failed has no reply to give.
func (f *fanOut) callerError() error {
	select {
	case <-f.fed:
		return f.callerErr
	default:
		return nil
	}
}
