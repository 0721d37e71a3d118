package connlimit

import (
	"errors"
	"net"
	"slices"
	"sync"

	"github.com/aegis-os/aegis/internal/clock"
)

// waiter is an accepted connection waiting for a slot: it holds its socket
// and a timer, nothing else (no TLS, no buffers).
type waiter struct {
	raw   net.Conn
	src   string
	lis   *listener
	timer clock.Timer
	left  chan struct{} // closed when the waiter leaves the queue for a slot or a close
	// recheck is set while timer runs to MinEvictAge rather than to the
	// end of SlotWait; guarded by the Limiter's lock.
	recheck bool
}

// listener is a net.Listener bounded by a Limiter. One goroutine accepts
// (acceptLoop); Accept returns what it admitted and the waiters that got a
// slot since, in the order they got it.
type listener struct {
	net.Listener
	l *Limiter

	start  sync.Once
	out    chan *conn    // admitted connections, for Accept
	errs   chan error    // temporary errors of the listener, for Accept
	ended  chan struct{} // closed when acceptLoop returns
	err    error         // why acceptLoop returned; set before ended closes
	closed chan struct{} // closed by Close
	once   sync.Once
}

func newListener(lis net.Listener, l *Limiter) *listener {
	return &listener{
		Listener: lis, l: l,
		// Room for every waiter the Limiter may hold, and one more from
		// acceptLoop, so that a slot given under the lock never blocks.
		out:  make(chan *conn, l.cfg.MaxWaiting+1),
		errs: make(chan error), ended: make(chan struct{}), closed: make(chan struct{}),
	}
}

// Accept returns the next connection that got a slot. Connections over
// their source's cap, or that waited Config.SlotWait for a slot in vain,
// are closed and never returned.
func (w *listener) Accept() (net.Conn, error) {
	w.start.Do(func() { go w.acceptLoop() })

	select {
	case c := <-w.out:
		return c, nil
	case err := <-w.errs:
		return nil, err
	case <-w.ended:
		// A connection handed over before the end is still served.
		select {
		case c := <-w.out:
			return c, nil
		default:
			return nil, w.err
		}
	}
}

// acceptLoop accepts until the listener fails or is closed, handing
// admitted connections to Accept. A temporary error (out of descriptors,
// say) is handed over too, and the loop goes on once Accept has returned
// it, so that the server's own backoff paces the retries as before.
func (w *listener) acceptLoop() {
	defer close(w.ended)

	for {
		raw, err := w.Listener.Accept()
		if err != nil {
			if !temporary(err) {
				w.err = err

				return
			}

			select {
			case w.errs <- err:
				continue
			case <-w.closed:
				w.err = err

				return
			}
		}

		if c := w.l.offer(raw, w.Addr(), w); c != nil {
			select {
			case w.out <- c:
			case <-w.closed:
				_ = c.Close()
			}
		}
	}
}

// Close closes the listener, the connections waiting on it and those
// admitted but not yet returned by Accept.
func (w *listener) Close() error {
	err := w.Listener.Close()

	w.once.Do(func() {
		close(w.closed)
		w.l.dropWaiters(w)

		for {
			select {
			case c := <-w.out:
				_ = c.Close()
			default:
				return
			}
		}
	})

	return err
}

// mayWaitLocked reports whether a newcomer on w would wait for a slot,
// when none is free: the Limiter waits at all and its queue has room.
func (l *Limiter) mayWaitLocked(w *listener) bool {
	return w != nil && l.cfg.SlotWait > 0 && len(l.waiting) < l.cfg.MaxWaiting
}

// enqueueLocked makes raw wait for a slot, when the Limiter waits at all,
// its queue has room and w is open; it reports whether raw waits.
func (l *Limiter) enqueueLocked(raw net.Conn, src string, w *listener) bool {
	if w == nil || l.cfg.SlotWait <= 0 || len(l.waiting) >= l.cfg.MaxWaiting {
		return false
	}

	select {
	case <-w.closed:
		return false
	default:
	}

	wt := &waiter{raw: raw, src: src, lis: w, left: make(chan struct{})}

	// A waiter looks for a slot to take once more MinEvictAge on, when
	// the young connections it spared may have grown old (evictableLocked).
	if l.cfg.SlotWait > MinEvictAge {
		wt.recheck = true
		wt.timer = l.cfg.Clock.NewTimer(MinEvictAge)
	} else {
		wt.timer = l.cfg.Clock.NewTimer(l.cfg.SlotWait)
	}

	l.waiting = append(l.waiting, wt)
	l.waitingBy[src]++

	go l.expire(wt)

	return true
}

// expire refuses wt once its SlotWait is over, unless it got a slot or was
// dropped before; MinEvictAge into the wait and at its end, it takes a slot
// by eviction if one can be had.
func (l *Limiter) expire(wt *waiter) {
	select {
	case <-wt.timer.C():
	case <-wt.left:
		return
	}

	l.mu.Lock()

	if victim := l.takeForWaiterLocked(wt); victim != nil {
		l.mu.Unlock()
		_ = victim.Close()

		return
	}

	if victim, ok := l.roomForWaiterLocked(wt); ok {
		l.mu.Unlock()

		if victim != nil {
			_ = victim.Close()
		}

		return
	}

	if wt.recheck {
		wt.recheck = false
		wt.timer = l.cfg.Clock.NewTimer(l.cfg.SlotWait - MinEvictAge)
		l.mu.Unlock()
		l.expire(wt)

		return
	}

	queued := l.unqueueLocked(wt)

	refused := 0
	if queued {
		refused = l.refusedLocked()
	}
	l.mu.Unlock()

	if queued {
		_ = wt.raw.Close()
		l.logRefusals(wt.lis.Addr(), wt.src, refused)
	}
}

// unqueueLocked takes wt off the queue; it reports false when wt was no
// longer on it.
func (l *Limiter) unqueueLocked(wt *waiter) bool {
	i := slices.Index(l.waiting, wt)
	if i < 0 {
		return false
	}

	l.waiting = slices.Delete(l.waiting, i, i+1)
	close(wt.left)

	if l.waitingBy[wt.src]--; l.waitingBy[wt.src] == 0 {
		delete(l.waitingBy, wt.src)
	}

	return true
}

// takeForWaiterLocked gives wt, still waiting, the slot of a connection
// that may be evicted for a newcomer that waits (evictableLocked), and
// returns that connection, to close once the lock is released; nil when
// there is none.
func (l *Limiter) takeForWaiterLocked(wt *waiter) *conn {
	if slices.Index(l.waiting, wt) < 0 {
		return nil
	}

	victim := l.evictableLocked(true)
	if victim == nil {
		return nil
	}

	l.removeLocked(victim)
	l.wastedLocked(victim.source)
	l.stats.Evicted++
	l.admitLocked(wt)

	return victim
}

// admitWaiterLocked gives a free slot to the oldest waiter, if any, and
// hands its connection to its listener's Accept.
func (l *Limiter) admitWaiterLocked() {
	if len(l.waiting) == 0 || l.stats.Open >= l.cfg.Total {
		return
	}

	l.admitLocked(l.waiting[0])
}

// admitLocked gives wt a slot and hands its connection to its listener's
// Accept.
func (l *Limiter) admitLocked(wt *waiter) {
	l.unqueueLocked(wt)
	wt.timer.Stop()

	c := newConn(wt.raw, l, wt.src)
	l.addLocked(c)
	l.stats.Waited++
	l.handOverLocked(wt, c)
}

// roomForWaiterLocked moves wt, still waiting, to the handshake room when
// it may have a place there (roomLocked), and returns the handshake that
// gave its place, to close once the lock is released.
func (l *Limiter) roomForWaiterLocked(wt *waiter) (*conn, bool) {
	if slices.Index(l.waiting, wt) < 0 {
		return nil, false
	}

	victim, ok := l.roomLocked(wt.src)
	if !ok {
		return nil, false
	}

	l.unqueueLocked(wt)
	wt.timer.Stop()

	c := newConn(wt.raw, l, wt.src)
	l.addRoomLocked(c)
	l.stats.Waited++
	l.handOverLocked(wt, c)

	return victim, true
}

// handOverLocked starts c's FirstCall watch and hands c, which got a slot
// while it waited on wt, to its listener's Accept.
func (l *Limiter) handOverLocked(wt *waiter, c *conn) {
	go c.watchFirstCall(l.cfg.Clock, l.cfg.FirstCall)

	// out has room for every waiter (see newListener); should Accept have
	// fallen so far behind that it is full, the hand-over waits outside
	// the lock.
	select {
	case wt.lis.out <- c:
	default:
		go func() {
			select {
			case wt.lis.out <- c:
			case <-wt.lis.closed:
				_ = c.Close()
			}
		}()
	}
}

// dropWaiters closes the connections waiting on w, which is closing.
func (l *Limiter) dropWaiters(w *listener) {
	l.mu.Lock()

	var dropped []*waiter

	for _, wt := range slices.Clone(l.waiting) {
		if wt.lis == w {
			l.unqueueLocked(wt)
			wt.timer.Stop()
			dropped = append(dropped, wt)
		}
	}
	l.mu.Unlock()

	for _, wt := range dropped {
		_ = wt.raw.Close()
	}
}

// checkWaitConfig checks the waiting part of a Config.
func checkWaitConfig(cfg Config) error {
	switch {
	case cfg.SlotWait < 0:
		return errors.New("connlimit: SlotWait must not be negative")
	case cfg.SlotWait > 0 && cfg.MaxWaiting <= 0:
		return errors.New("connlimit: MaxWaiting must be positive when connections wait for a slot")
	}

	return nil
}

// temporary reports whether a listener's error passes, as net/http and
// gRPC judge it before they accept again.
func temporary(err error) bool {
	var t interface{ Temporary() bool }

	return errors.As(err, &t) && t.Temporary()
}
