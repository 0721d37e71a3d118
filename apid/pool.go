package apid

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
)

// errPoolFull is returned when every pooled connection is in use and the
// pool may not grow.
var errPoolFull = errors.New("apid: too many nodes in use at once")

// errPoolClosed is returned once the server is shutting down.
var errPoolClosed = errors.New("apid: shutting down")

// poolConfig configures a pool.
type poolConfig struct {
	// dial makes a connection to a node; it must not block (grpc.NewClient
	// connects on first use).
	dial  func(target) (*grpc.ClientConn, error)
	clock clock.Clock
	max   int
	idle  time.Duration
	log   *slog.Logger
}

// pool keeps one connection per node address and shares it between calls.
// A connection unused for longer than idle is closed; when the pool is at
// its bound, the connection unused for longest makes room. A connection in
// use is never closed by the pool, so no call is cut short.
type pool struct {
	cfg    poolConfig
	mu     sync.Mutex
	conns  map[string]*pooled
	closed bool
}

type pooled struct {
	conn     *grpc.ClientConn
	active   int
	lastUsed time.Time
}

func newPool(cfg poolConfig) *pool {
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}

	return &pool{cfg: cfg, conns: map[string]*pooled{}}
}

// get returns the connection to t and a release func the caller must call
// once its call is over.
func (p *pool) get(t target) (*grpc.ClientConn, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if p.closed {
		return nil, nil, errPoolClosed
	}

	now := p.cfg.clock.Now()
	p.sweepLocked(now)

	e, ok := p.conns[t.addr]
	if !ok {
		if len(p.conns) >= p.cfg.max && !p.evictLocked() {
			return nil, nil, errPoolFull
		}

		conn, err := p.cfg.dial(t)
		if err != nil {
			return nil, nil, err
		}

		e = &pooled{conn: conn}
		p.conns[t.addr] = e
	}

	e.active++
	e.lastUsed = now

	return e.conn, sync.OnceFunc(func() { p.release(e) }), nil
}

func (p *pool) release(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()

	e.active--
	e.lastUsed = p.cfg.clock.Now()
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

	if err := e.conn.Close(); err != nil {
		p.cfg.log.Debug("closing a node connection", slog.String(FieldNode, addr), slog.String(FieldError, err.Error()))
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
}
