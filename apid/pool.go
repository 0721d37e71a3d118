package apid

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// errPoolFull is returned when every pooled connection is in use and the
// pool may not grow.
var errPoolFull = errors.New("apid: too many nodes in use at once")

// errCallerPoolFull is returned when a caller already has calls on
// MaxPooledNodesPerCaller nodes.
var errCallerPoolFull = fmt.Errorf("apid: a caller may have calls on at most %d other nodes at once", MaxPooledNodesPerCaller)

// errPoolClosed is returned once the server is shutting down.
var errPoolClosed = errors.New("apid: shutting down")

// caller is who takes a pooled connection: the pool's share of a caller
// is bounded by its identity, and only admins take the reserve.
type caller struct {
	// id identifies the client certificate's key.
	id    identity
	admin bool
}

// poolConfig configures a pool.
type poolConfig struct {
	// dial makes a connection to a node; it must not block (grpc.NewClient
	// connects on first use).
	dial  func(target) (*grpc.ClientConn, error)
	clock clock.Clock
	// max bounds the connections; perCaller the connections one caller
	// has calls on; reserve the connections only admins may take.
	max, perCaller, reserve int
	idle                    time.Duration
	log                     *slog.Logger
	// credential names the certificate a new connection would present
	// (the node's forwarding certificate). A pooled connection made with
	// another one is retired: a CA rotation re-issues that certificate,
	// and a peer that has dropped the old CA refuses every call on a
	// connection still authenticated by it. Nil never retires.
	credential func() []byte
}

// pool keeps one connection per node (its address, and the member name
// its certificate was checked for) and shares it between calls.
// A connection unused for longer than idle is closed; when the pool is at
// its bound, the connection unused for longest makes room. A connection in
// use is never closed by the pool, so no call is cut short.
//
// A caller holds a connection while it has calls on it. One caller holds
// at most perCaller connections, and callers who are not admins together
// at most max-reserve, so neither one caller nor many readers can take
// every connection and leave an admin's call without one.
type pool struct {
	cfg   poolConfig
	mu    sync.Mutex
	conns map[string]*pooled
	// held counts the connections each caller holds; nonAdmin those
	// held by at least one caller who is not an admin.
	held     map[identity]int
	nonAdmin int
	closed   bool
	// retired are connections left by a credential change that still
	// carry calls; each is closed when its last call ends.
	retired map[*pooled]bool
}

type pooled struct {
	conn     *grpc.ClientConn
	active   int
	lastUsed time.Time
	// holders counts the calls of each caller; nonAdmin those of callers
	// who are not admins.
	holders  map[identity]int
	nonAdmin int
	// credential is what poolConfig.credential said when it was dialed.
	credential []byte
}

func newPool(cfg poolConfig) *pool {
	cfg.log = defaults.Logger(cfg.log)

	return &pool{cfg: cfg, conns: map[string]*pooled{}, held: map[identity]int{}, retired: map[*pooled]bool{}}
}

// get returns the connection to t for c and a release func the caller
// must call once its call is over.
func (p *pool) get(t target, c caller) (*grpc.ClientConn, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if p.closed {
		return nil, nil, errPoolClosed
	}

	now := p.cfg.clock.Now()
	p.sweepLocked(now)

	var cred []byte
	if p.cfg.credential != nil {
		cred = p.cfg.credential()
	}

	key := t.connKey()

	e := p.conns[key]
	if e != nil && !bytes.Equal(e.credential, cred) {
		p.retireLocked(key, e)
		e = nil
	}

	if err := p.admitLocked(e, c); err != nil {
		return nil, nil, err
	}

	if e == nil {
		if len(p.conns) >= p.cfg.max && !p.evictLocked() {
			return nil, nil, errPoolFull
		}

		conn, err := p.cfg.dial(t)
		if err != nil {
			return nil, nil, err
		}

		e = &pooled{conn: conn, holders: map[identity]int{}, credential: cred}
		p.conns[key] = e
	}

	p.holdLocked(e, c, 1)
	e.lastUsed = now

	return e.conn, sync.OnceFunc(func() { p.release(e, c) }), nil
}

// admitLocked refuses c a connection it does not hold yet (e, nil for a
// new one) when c is at its own bound, or when c is not an admin and
// callers who are not admins hold all but the admins' reserve.
func (p *pool) admitLocked(e *pooled, c caller) error {
	if e == nil || e.holders[c.id] == 0 {
		if p.held[c.id] >= p.cfg.perCaller {
			return errCallerPoolFull
		}
	}

	if !c.admin && (e == nil || e.nonAdmin == 0) && p.nonAdmin >= p.cfg.max-p.cfg.reserve {
		return errPoolFull
	}

	return nil
}

// holdLocked counts one call of c on e more (n = 1) or less (n = -1).
func (p *pool) holdLocked(e *pooled, c caller, n int) {
	e.active += n

	if e.holders[c.id] += n; e.holders[c.id] == 0 {
		delete(e.holders, c.id)
		p.held[c.id]--
	} else if n > 0 && e.holders[c.id] == 1 {
		p.held[c.id]++
	}

	if p.held[c.id] == 0 {
		delete(p.held, c.id)
	}

	if c.admin {
		return
	}

	if e.nonAdmin += n; e.nonAdmin == 0 {
		p.nonAdmin--
	} else if n > 0 && e.nonAdmin == 1 {
		p.nonAdmin++
	}
}

func (p *pool) release(e *pooled, c caller) {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.holdLocked(e, c, -1)
	e.lastUsed = p.cfg.clock.Now()

	if p.retired[e] && e.active == 0 {
		delete(p.retired, e)
		p.closeConn("", e)
	}
}

// retireLocked takes a connection out of the pool: new calls get a new
// one, and the calls it carries end on it undisturbed.
func (p *pool) retireLocked(addr string, e *pooled) {
	delete(p.conns, addr)

	if e.active == 0 {
		p.closeConn(addr, e)

		return
	}

	p.retired[e] = true
}

// sweepLocked closes connections unused for longer than the idle timeout.
func (p *pool) sweepLocked(now time.Time) {
	for addr, e := range p.conns {
		if e.active == 0 && now.Sub(e.lastUsed) >= p.cfg.idle {
			p.closeLocked(addr, e)
		}
	}
}

// evictLocked closes the connection unused for longest, if one is unused.
func (p *pool) evictLocked() bool {
	var (
		oldestAddr string
		oldest     *pooled
	)

	for addr, e := range p.conns {
		if e.active == 0 && (oldest == nil || e.lastUsed.Before(oldest.lastUsed)) {
			oldestAddr, oldest = addr, e
		}
	}

	if oldest == nil {
		return false
	}

	p.closeLocked(oldestAddr, oldest)

	return true
}

func (p *pool) closeLocked(addr string, e *pooled) {
	delete(p.conns, addr)
	p.closeConn(addr, e)
}

func (p *pool) closeConn(addr string, e *pooled) {
	if err := e.conn.Close(); err != nil {
		p.cfg.log.Debug("closing a node connection", slog.String(logkey.Node, addr), slog.String(logkey.Error, err.Error()))
	}
}

// size returns how many connections the pool holds.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()

	return len(p.conns)
}

// close closes every connection; calls still running on them end.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.closed = true
	for addr, e := range p.conns {
		p.closeLocked(addr, e)
	}

	for e := range p.retired {
		p.closeConn("", e)
	}

	clear(p.retired)
}
