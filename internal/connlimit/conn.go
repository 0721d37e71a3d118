package connlimit

import (
	"container/list"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// States of a connection; each moves from stateWaiting once.
const (
	stateWaiting int32 = iota // no call yet
	stateCalled               // a call started: the connection is kept
	stateClosed               // closed for no call, or evicted
)

// conn is an admitted connection. Close frees its slot.
type conn struct {
	net.Conn

	l      *Limiter
	source string
	key    string

	state     atomic.Int32
	called    chan struct{} // closed when state becomes stateCalled
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	draining  bool // set once by Close's first call: linger closes the socket

	released bool // guarded by l.mu
	pool     int  // poolAnonymous, …; guarded by l.mu
	known    bool // in the room as a known source's; guarded by l.mu
	// inRoom is c's place in the handshake room, nil outside it; guarded
	// by l.mu.
	inRoom   *list.Element
	admitted time.Time // when it got its slot; set once under l.mu
	// atGate is c's place at the handshake gate (gate.go), nil when it
	// holds none; gatedAt and gateKnown say since when and in which list;
	// leftGate is when its latest handshake ended; gateWait is its wait
	// for a place. Guarded by l.mu.
	atGate    *list.Element
	gatedAt   time.Time
	leftGate  time.Time
	gateKnown bool
	gateWait  *list.Element

	// closing is done once Close has run (Closing), made on first use;
	// closed says Close ran. Guarded by closingMu.
	closingMu  sync.Mutex
	closing    context.Context
	endClosing context.CancelFunc
	closed     bool

	// first is the client's first byte, read by peek and not yet by Read;
	// only the handshake's goroutine reads either.
	first    [1]byte
	hasFirst bool
}

func newConn(raw net.Conn, l *Limiter, src string) *conn {
	return &conn{
		Conn: raw, l: l, source: src, key: connKey(raw.RemoteAddr(), raw.LocalAddr()),
		called: make(chan struct{}), done: make(chan struct{}),
	}
}

// connKey names a connection by its two ends: unique among the open
// connections of every listener a Limiter wraps.
func connKey(remote, local net.Addr) string {
	return remote.String() + " " + local.String()
}

// Close closes the connection and frees its slot. A connection that made
// no call and was not closed by the limiter (a failed TLS handshake, most
// often) is closed gracefully, within the bound of MaxLingering: see
// LingerTimeout. Once that started, later calls of Close leave the socket
// to the drain: a server often closes a failed handshake twice (crypto/tls's
// Conn, then gRPC the connection under it), and closing the socket at the
// second call would reset it with the client's data unread, the very
// reset the drain is there to prevent.
func (c *conn) Close() error {
	first := false

	c.closeOnce.Do(func() {
		first = true

		c.l.release(c)
		close(c.done)
		c.endContext()

		c.draining = c.state.Load() == stateWaiting && c.shutWrite()
	})

	switch {
	case c.draining && first:
		go c.linger(c.Conn.(*net.TCPConn))

		return nil
	case c.draining:
		return nil
	default:
		return c.Conn.Close()
	}
}

// shutWrite takes one of the MaxLingering graceful closes and shuts the
// write side of a TCP connection; it reports whether both happened.
func (c *conn) shutWrite() bool {
	if !c.l.startLinger() {
		return false
	}

	if tcp, ok := c.Conn.(*net.TCPConn); ok && tcp.CloseWrite() == nil {
		return true
	}

	c.l.endLinger()

	return false
}

// linger drains what the peer still sends until it closes its side, the
// timeout passes or maxLingerRead bytes were read, then closes tcp.
func (c *conn) linger(tcp *net.TCPConn) {
	defer c.l.endLinger()

	_ = tcp.SetReadDeadline(time.Now().Add(LingerTimeout))
	_, _ = io.CopyN(io.Discard, tcp, maxLingerRead)
	_ = tcp.Close()
}

// peek waits for the client's first byte, and keeps it for Read: the gate
// gives a place only to a handshake whose client has begun it.
func (c *conn) peek() error {
	n, err := c.Conn.Read(c.first[:])
	if n == 0 {
		return err
	}

	c.hasFirst = true

	return nil
}

// Read reads what peek kept first.
func (c *conn) Read(p []byte) (int, error) {
	if c.hasFirst && len(p) > 0 {
		p[0], c.hasFirst = c.first[0], false

		return 1, nil
	}

	return c.Conn.Read(p)
}

// markCalled records that a call started, which ends the FirstCall watch
// and makes the connection one the Limiter never evicts.
func (c *conn) markCalled() {
	if c.state.CompareAndSwap(stateWaiting, stateCalled) {
		close(c.called)
		c.l.called(c)
	}
}

// watchFirstCall closes the connection if no call starts within d.
func (c *conn) watchFirstCall(clk clock.Clock, d time.Duration) {
	t := clk.NewTimer(d)
	defer t.Stop()

	select {
	case <-t.C():
	case <-c.called:
		return
	case <-c.done:
		return
	}

	if c.state.CompareAndSwap(stateWaiting, stateClosed) {
		c.l.expired(c)
		_ = c.Close()
	}
}

// context is done once c is closed.
func (c *conn) context() context.Context {
	c.closingMu.Lock()
	defer c.closingMu.Unlock()

	if c.closing == nil {
		c.closing, c.endClosing = context.WithCancel(context.Background())
		if c.closed {
			c.endClosing()
		}
	}

	return c.closing
}

// endContext ends c's context, as c closes.
func (c *conn) endContext() {
	c.closingMu.Lock()
	defer c.closingMu.Unlock()

	c.closed = true
	if c.endClosing != nil {
		c.endClosing()
	}
}
