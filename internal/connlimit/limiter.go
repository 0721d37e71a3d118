package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Config configures a Limiter. New reads it once.
type Config struct {
	// PerSource bounds the open connections of one source: an IPv4
	// address, or an IPv6 /64 (internal/source). Required; below Total, so that
	// one source never holds every slot.
	PerSource int
	// Total bounds the open connections of all sources together. Required.
	Total int
	// FirstCall is how long a connection may stay open without starting a
	// call; then it is closed. Required.
	FirstCall time.Duration
	// Logger receives the records of refused connections, at most one per
	// RefusalLogInterval. Nil discards.
	Logger *slog.Logger
	// Clock times FirstCall, SlotWait and the refusal records. Nil means
	// the system clock.
	Clock clock.Clock
	// SlotWait is how long a connection may wait for a slot when every
	// slot is taken and none can be freed by eviction; zero refuses it at
	// once. A connection over its source's cap is refused at once either
	// way.
	SlotWait time.Duration
	// MaxWaiting bounds the connections waiting for a slot at once; beyond
	// it they are refused. Required when SlotWait is set.
	MaxWaiting int
	// ProvenTotal and ProvenPerSource bound the connections whose client
	// proved itself in the TLS handshake (Credentials: a cluster's node,
	// with its node certificate): they leave the table of Total and
	// PerSource once proven, are never evicted, and never wait behind
	// anonymous connections. Zero means no proven table: every connection
	// counts against Total. ProvenPerSource, when ProvenTotal is set, is
	// required and below ProvenTotal.
	ProvenTotal, ProvenPerSource int
	// MaxHandshakes bounds the TLS handshakes under way at once through
	// Credentials (gate.go): a handshake starts once its client sent its
	// first byte and fewer than this many are under way; the others wait,
	// admitted, for a place. Zero means no bound.
	MaxHandshakes int
	// HandshakeRoom is how many connections may do their handshake beyond
	// Total when no anonymous slot can be had (every one holds a caller):
	// the chance for a node to prove itself whatever anonymous callers
	// hold. One that proves nothing is closed at the end of its handshake
	// unless an anonymous slot came free. Required when ProvenTotal is set.
	HandshakeRoom int
}

// Stats counts what a Limiter did.
type Stats struct {
	// Open is the number of connections open now.
	Open int
	// Refused counts connections closed at accept: over their source's cap,
	// or with every slot taken.
	Refused int
	// Evicted counts connections without a call closed to make room for a
	// newer one when every slot was taken.
	Evicted int
	// Expired counts connections closed for starting no call within FirstCall.
	Expired int
	// Waited counts connections that waited for a slot and got one; those
	// whose wait ran out count as Refused.
	Waited int
	// Proven is the number of proven connections open now (not in Open).
	Proven int
	// Handshaking is the number of connections in the handshake room now
	// (not in Open).
	Handshaking int
}

// Limiter holds the connection table of one server. Wrap its listeners
// and give its StatsHandler to the gRPC server that serves them. It is safe
// for concurrent use.
type Limiter struct {
	cfg Config

	mu       sync.Mutex
	sources  map[string]*sourceConns
	byAddr   map[string]*conn // by connKey, for the stats handler
	ranks    *ranks           // sources by their connections without a call (evict.go)
	suspects *suspects        // sources that wasted a slot lately (suspects.go)
	stats    Stats
	refusals int // since the last record
	lastLog  time.Time

	lingering atomic.Int32 // connections being closed gracefully

	waiting   []*waiter      // oldest first (wait.go)
	waitingBy map[string]int // waiters by source

	gate   gate          // handshakes under way (gate.go)
	proven proven        // connections proven in their handshake (proven.go)
	room   handshakeRoom // handshakes beyond Total (room.go)
	known  known         // sources that proved themselves (known.go)
}

// New checks cfg and returns a Limiter with no connection.
func New(cfg Config) (*Limiter, error) {
	switch {
	case cfg.PerSource <= 0 || cfg.Total <= 0:
		return nil, errors.New("connlimit: PerSource and Total must be positive")
	case cfg.PerSource >= cfg.Total:
		return nil, errors.New("connlimit: PerSource must be below Total, or one source can hold every slot")
	case cfg.FirstCall <= 0:
		return nil, errors.New("connlimit: FirstCall must be positive")
	case cfg.MaxHandshakes < 0:
		return nil, errors.New("connlimit: MaxHandshakes must not be negative")
	}

	if err := checkWaitConfig(cfg); err != nil {
		return nil, err
	}

	if err := checkProvenConfig(cfg); err != nil {
		return nil, err
	}

	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Clock = defaults.Clock(cfg.Clock)

	return &Limiter{
		cfg: cfg, sources: map[string]*sourceConns{}, byAddr: map[string]*conn{},
		ranks: newRanks(cfg.PerSource), suspects: newSuspects(MaxSuspects),
		waitingBy: map[string]int{}, proven: proven{bySource: map[string]int{}},
	}, nil
}

// startLinger takes one of the MaxLingering graceful closes, if one is
// free.
func (l *Limiter) startLinger() bool {
	if l.lingering.Add(1) > MaxLingering {
		l.lingering.Add(-1)

		return false
	}

	return true
}

func (l *Limiter) endLinger() { l.lingering.Add(-1) }

// Stats returns the counts so far.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()

	st := l.stats
	st.Proven, st.Handshaking = l.proven.open, l.room.len()

	return st
}

// Wrap returns lis bounded by l. Closing it closes lis and the
// connections still waiting for a slot; connections already accepted stay
// open.
func (l *Limiter) Wrap(lis net.Listener) net.Listener {
	return newListener(lis, l)
}

// admit is offer without waiting: raw gets a slot now or is closed.
func (l *Limiter) admit(raw net.Conn, lisAddr net.Addr) *conn {
	return l.offer(raw, lisAddr, nil)
}

// offer gives raw a slot, taking one from a connection without a call if
// need be (makeRoom), and starts its FirstCall watch. When no slot can be
// had, raw waits for one on w (see Config.SlotWait) if it may, and offer
// returns nil; otherwise offer closes raw and returns nil.
func (l *Limiter) offer(raw net.Conn, lisAddr net.Addr, w *listener) *conn {
	src := sourceOf(raw.RemoteAddr())

	l.mu.Lock()

	// A known source does its handshake in the room, where no newcomer
	// takes its place (known.go).
	if l.claimLocked(src) {
		return l.enterRoomUnlock(raw, src, nil, true)
	}

	victim, ok := l.makeRoom(src, l.mayWaitLocked(w))

	if !ok && l.belowSourceCapLocked(src) {
		if l.enqueueLocked(raw, src, w) {
			l.mu.Unlock()

			return nil
		}

		// Every slot holds a caller, and the queue is full: a handshake
		// that may prove a node gets the room.
		if victim, ok := l.roomLocked(src); ok {
			return l.enterRoomUnlock(raw, src, victim, false)
		}
	}

	if !ok {
		refused := l.refusedLocked()
		l.mu.Unlock()
		_ = raw.Close()
		l.logRefusals(lisAddr, src, refused)

		return nil
	}

	c := newConn(raw, l, src)
	l.addLocked(c)
	l.mu.Unlock()

	if victim != nil {
		_ = victim.Close()
	}

	go c.watchFirstCall(l.cfg.Clock, l.cfg.FirstCall)

	return c
}

// enterRoomUnlock admits raw to the handshake room, where roomLocked
// made a place (closing victim, the handshake that gave it, once l.mu is
// released) or, known, as a known source's (claimLocked), and starts its
// FirstCall watch.
func (l *Limiter) enterRoomUnlock(raw net.Conn, src string, victim *conn, known bool) *conn {
	c := newConn(raw, l, src)
	c.known = known
	l.addRoomLocked(c)
	l.mu.Unlock()

	if victim != nil {
		_ = victim.Close()
	}

	go c.watchFirstCall(l.cfg.Clock, l.cfg.FirstCall)

	return c
}

// logRefusals records refused connections, when refusedLocked said to.
func (l *Limiter) logRefusals(lisAddr net.Addr, src string, refused int) {
	if refused > 0 {
		l.cfg.Logger.Warn("connections refused: source or total connection cap reached",
			slog.String(logkey.Listener, lisAddr.String()), slog.String(logkey.Source, src), slog.Int(logkey.Refused, refused))
	}
}

// heldLocked is how many connections src holds: open, or waiting for a slot.
func (l *Limiter) heldLocked(src string) int {
	have := l.waitingBy[src]
	if s := l.sources[src]; s != nil {
		have += s.open
	}

	return have
}

// belowSourceCapLocked reports whether src may hold one more connection.
func (l *Limiter) belowSourceCapLocked(src string) bool {
	return l.heldLocked(src) < l.cfg.PerSource
}

// makeRoom reports whether a connection of src may be admitted; when every
// slot is taken it frees one by evicting, and returns the connection to
// close once the lock is released. A newcomer that mayWait spares young
// connections (evictableLocked).
func (l *Limiter) makeRoom(src string, mayWait bool) (*conn, bool) {
	if l.heldLocked(src) >= l.cfg.PerSource {
		return nil, false
	}

	if l.stats.Open < l.cfg.Total {
		return nil, true
	}

	victim := l.evictableLocked(mayWait)
	if victim == nil {
		return nil, false
	}

	l.removeLocked(victim)
	l.wastedLocked(victim.source)
	l.stats.Evicted++

	return victim, true
}

func (l *Limiter) addLocked(c *conn) {
	s := l.sources[c.source]
	if s == nil {
		s = &sourceConns{key: c.source}
		l.sources[c.source] = s
	}

	s.open++
	c.admitted = l.cfg.Clock.Now()
	l.addUncalledLocked(s, c)
	l.byAddr[c.key] = c
	l.stats.Open++
}

// removeLocked frees c's slot; it is called once per connection.
func (l *Limiter) removeLocked(c *conn) {
	c.released = true
	l.detachLocked(c)
	delete(l.byAddr, c.key)
}

// detachLocked takes c out of the anonymous table.
func (l *Limiter) detachLocked(c *conn) {
	l.stats.Open--

	s := l.sources[c.source]
	l.dropUncalledLocked(s, c)

	if s.open--; s.open == 0 {
		delete(l.sources, c.source)
	}
}

// release frees c's slot unless an eviction did already.
func (l *Limiter) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.leaveGateLocked(c)

	if c.released {
		return
	}

	switch c.pool {
	case poolProven:
		c.released = true
		l.releaseProvenLocked(c)
		delete(l.byAddr, c.key)
	case poolRoom:
		c.released = true
		l.dropRoomLocked(c)
	default:
		l.removeLocked(c)
		l.admitWaiterLocked()
	}
}

// expired counts c, closed for starting no call within FirstCall.
func (l *Limiter) expired(c *conn) {
	l.mu.Lock()
	l.stats.Expired++
	l.wastedLocked(c.source)
	l.mu.Unlock()
}

// refusedLocked counts a refusal; once per RefusalLogInterval it returns
// the refusals since the last time, to be logged, and zero otherwise.
func (l *Limiter) refusedLocked() int {
	l.stats.Refused++
	l.refusals++

	now := l.cfg.Clock.Now()
	if now.Sub(l.lastLog) < RefusalLogInterval {
		return 0
	}

	n := l.refusals
	l.refusals, l.lastLog = 0, now

	return n
}

// lookup finds the open connection between remote and local.
func (l *Limiter) lookup(remote, local net.Addr) *conn {
	if remote == nil || local == nil {
		return nil
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	return l.byAddr[connKey(remote, local)]
}
