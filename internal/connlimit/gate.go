package connlimit

import (
	"container/list"
	"net"
	"time"
)

// gate bounds the TLS handshakes under way (Config.MaxHandshakes). A
// handshake is mostly CPU: a key exchange and a signature on each side,
// and on the server a client certificate to verify. Started without
// bound, thousands at once (a join storm, every node of a control plane
// that came back) share the CPU until each outlasts its deadline or is
// evicted as idle, and the work of all of them is thrown away: clients
// retry, and the load that caused it persists. At the gate a handshake
// starts once its client has sent its first byte and a place is free;
// the others wait, accepted, holding their slot and a goroutine, and
// costing no CPU.
//
// The listener still accepts at once, so the limiter's admission (caps,
// eviction, suspects, the room) sees every newcomer as before: the gate
// only orders what is admitted. A connection that sends nothing never
// takes a place. A freed place goes to the waiting handshake of a known
// source first, then of a stranger, then of a suspect, the newest first
// in each: under overload the newest has the most of its deadline left,
// and a flood's connections, once its sources are suspects, go last. A
// stranger's handshake that has held its place for GateEvictAge while
// another waits gives it up (a strike against its source, as an
// eviction), so a client that stalls mid-handshake cannot hold the gate;
// a known source's is never displaced, and its deadline bounds it.
type gate struct {
	held             int
	known, strangers list.List    // *conn holding a place, oldest first
	waiting          [3]list.List // *gateWait by class, oldest first
}

// Classes of a handshake waiting at the gate, in the order a freed place
// goes to them.
const (
	waitKnown = iota
	waitStranger
	waitSuspect
)

// gateWait is a handshake waiting for a place; ready closes when it has
// one.
type gateWait struct {
	c     *conn
	ready chan struct{}
}

// enterGate waits until c's client has sent its first byte and c holds a
// place at the gate; leaveGate must follow once its handshake ends. It
// fails when the connection fails or closes first.
func (l *Limiter) enterGate(c *conn) error {
	if l.cfg.MaxHandshakes == 0 {
		return nil
	}

	if err := c.peek(); err != nil {
		return err
	}

	l.mu.Lock()

	if c.released || c.state.Load() == stateClosed {
		l.mu.Unlock()

		return net.ErrClosed
	}

	if l.gate.held < l.cfg.MaxHandshakes {
		l.holdLocked(c)
		l.mu.Unlock()

		return nil
	}

	w := &gateWait{c: c, ready: make(chan struct{})}
	c.gateWait = l.gate.waiting[l.waitClassLocked(c.source)].PushBack(w)

	for {
		victim, wait := l.stalledLocked()
		l.mu.Unlock()

		if victim != nil {
			_ = victim.Close()
		}

		t := l.cfg.Clock.NewTimer(wait)

		select {
		case <-w.ready:
			t.Stop()

			return nil
		case <-c.done:
			t.Stop()

			return net.ErrClosed
		case <-t.C():
		}

		l.mu.Lock()
	}
}

// waitClassLocked is the class src's handshake waits in.
func (l *Limiter) waitClassLocked(src string) int {
	switch {
	case l.knownLocked(src):
		return waitKnown
	case l.suspects.has(src, l.cfg.Clock.Now()):
		return waitSuspect
	default:
		return waitStranger
	}
}

// holdLocked gives c a place at the gate.
func (l *Limiter) holdLocked(c *conn) {
	l.gate.held++
	c.gatedAt = l.cfg.Clock.Now()
	c.gateKnown = l.knownLocked(c.source)

	if c.gateKnown {
		c.atGate = l.gate.known.PushBack(c)
	} else {
		c.atGate = l.gate.strangers.PushBack(c)
	}
}

// stalledLocked displaces the oldest stranger's handshake once it held its
// place for GateEvictAge, and returns it to close once l.mu is released;
// its place goes to the first in line. Otherwise it returns how long
// until it asks again.
func (l *Limiter) stalledLocked() (*conn, time.Duration) {
	e := l.gate.strangers.Front()
	if e == nil {
		return nil, GateEvictAge
	}

	c, _ := e.Value.(*conn)

	if age := l.cfg.Clock.Now().Sub(c.gatedAt); age < GateEvictAge {
		return nil, GateEvictAge - age
	}

	l.leaveGateLocked(c)

	if !c.state.CompareAndSwap(stateWaiting, stateClosed) {
		// It is being closed already.
		return nil, 0
	}

	l.wastedLocked(c.source)
	l.stats.Evicted++

	return c, 0
}

// leaveGate ends c's place or wait at the gate: its handshake is over.
func (l *Limiter) leaveGate(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.leaveGateLocked(c)
}

// leaveGateLocked ends c's place at the gate, giving it to the first in
// line, or c's wait for one; c may have neither.
func (l *Limiter) leaveGateLocked(c *conn) {
	if c.gateWait != nil {
		// Only the list that holds it removes it.
		for i := range l.gate.waiting {
			l.gate.waiting[i].Remove(c.gateWait)
		}

		c.gateWait = nil
	}

	if c.atGate == nil {
		return
	}

	if c.gateKnown {
		l.gate.known.Remove(c.atGate)
	} else {
		l.gate.strangers.Remove(c.atGate)
	}

	c.atGate, c.leftGate = nil, l.cfg.Clock.Now()
	l.gate.held--

	l.handOffLocked()
}

// handOffLocked gives a free place to the newest waiting handshake of the
// first class that has one.
func (l *Limiter) handOffLocked() {
	if l.gate.held >= l.cfg.MaxHandshakes {
		return
	}

	for i := range l.gate.waiting {
		if e := l.gate.waiting[i].Back(); e != nil {
			w, _ := e.Value.(*gateWait)
			l.gate.waiting[i].Remove(e)
			w.c.gateWait = nil
			l.holdLocked(w.c)
			close(w.ready)

			return
		}
	}
}
