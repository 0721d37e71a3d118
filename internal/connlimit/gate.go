package connlimit

import (
	"container/list"
	"errors"
	"time"
)

// gate bounds the connections in their TLS handshake (Config.MaxHandshakes).
// A handshake is mostly CPU: a key exchange and a signature on each side,
// and on the server a client certificate to verify. Accepted without
// bound, thousands of them at once (a join storm, every node of a control
// plane that came back) share the CPU until each outlasts its deadline or
// is evicted as idle, and the work of all of them is thrown away: clients
// retry, and the load that caused it persists. At the gate the listener
// accepts no more while MaxHandshakes are under way, so the rest wait in
// the kernel's accept queue, unread and costing nothing, and those started
// finish.
//
// A client that stalls in its handshake would hold its place for the
// handshake's deadline; so a stranger's handshake that has held its place
// for GateEvictAge gives it to the next connection when the gate is full
// (a strike against its source, as an eviction). A known source's
// handshake (known.go) is never displaced: its deadline bounds it.
type gate struct {
	// held counts the places taken: by handshakes under way, and by the
	// accept loop from its wait to its offer.
	held             int
	known, strangers list.List // *conn in their handshake, oldest first
	// freed wakes an accept loop waiting for a place; capacity 1. The
	// listeners of one Limiter share the gate: a place freed wakes one of
	// them, and the others ask again within GateEvictAge.
	freed chan struct{}
}

// enterGate waits until a place at the gate is free, or a stalled
// stranger's can be taken, and takes it for the next connection the
// listener accepts. It returns errGateClosed once closed is closed.
func (l *Limiter) enterGate(closed <-chan struct{}) error {
	if l.cfg.MaxHandshakes == 0 {
		return nil
	}

	for {
		l.mu.Lock()

		if l.gate.held < l.cfg.MaxHandshakes {
			l.gate.held++
			l.mu.Unlock()

			return nil
		}

		victim, wait := l.stalledLocked()
		l.mu.Unlock()

		if victim != nil {
			_ = victim.Close()

			return nil
		}

		t := l.cfg.Clock.NewTimer(wait)

		select {
		case <-l.gate.freed:
		case <-t.C():
		case <-closed:
			t.Stop()

			return errGateClosed
		}

		t.Stop()
	}
}

var errGateClosed = errors.New("connlimit: listener closed")

// stalledLocked takes the place of the oldest stranger's handshake once
// it is GateEvictAge old, and returns it to close once l.mu is released;
// the place passes to the caller. Otherwise it returns how long to wait
// before asking again.
func (l *Limiter) stalledLocked() (*conn, time.Duration) {
	for e := l.gate.strangers.Front(); e != nil; e = l.gate.strangers.Front() {
		c, _ := e.Value.(*conn)

		age := l.cfg.Clock.Now().Sub(c.gatedAt)
		if age < GateEvictAge {
			return nil, GateEvictAge - age
		}

		l.gate.strangers.Remove(e)
		c.atGate = nil

		if c.state.CompareAndSwap(stateWaiting, stateClosed) {
			l.wastedLocked(c.source)
			l.stats.Evicted++

			return c, 0
		}

		// It is being closed for making no call: its place is free, and
		// the caller asks again at once.
		l.freeGateLocked()

		return nil, 0
	}

	return nil, GateEvictAge
}

// gateHold gives the place enterGate took to c, admitted by offer, until
// its handshake ends (leaveGateLocked). A connection closed meanwhile
// frees it at once.
func (l *Limiter) gateHold(c *conn) {
	if l.cfg.MaxHandshakes == 0 {
		return
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	if c.released || c.state.Load() != stateWaiting {
		l.freeGateLocked()

		return
	}

	c.gatedAt = l.cfg.Clock.Now()
	c.gateKnown = l.knownLocked(c.source)

	if c.gateKnown {
		c.atGate = l.gate.known.PushBack(c)
	} else {
		c.atGate = l.gate.strangers.PushBack(c)
	}
}

// gateRelease frees the place enterGate took for a connection that offer
// did not admit (refused, or waiting for a slot), or that Accept failed.
func (l *Limiter) gateRelease() {
	if l.cfg.MaxHandshakes == 0 {
		return
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	l.freeGateLocked()
}

// leaveGate ends c's place at the gate: its handshake is over.
func (l *Limiter) leaveGate(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.leaveGateLocked(c)
}

// leaveGateLocked ends c's place at the gate, if it holds one: its
// handshake ended, it made a call, or it closed.
func (l *Limiter) leaveGateLocked(c *conn) {
	if c.atGate == nil {
		return
	}

	if c.gateKnown {
		l.gate.known.Remove(c.atGate)
	} else {
		l.gate.strangers.Remove(c.atGate)
	}

	c.atGate = nil
	l.freeGateLocked()
}

// freeGateLocked frees one place and wakes the accept loop waiting for one.
func (l *Limiter) freeGateLocked() {
	l.gate.held--

	select {
	case l.gate.freed <- struct{}{}:
	default:
	}
}
