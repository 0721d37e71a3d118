package connlimit

import (
	"net"
	"time"
)

// The door: admission before the handshake when every place is taken.
//
// A listener whose connections may wait for a slot (Config.SlotWait)
// holds its door when a newcomer finds no slot, no place in the queue
// and no place in the handshake room that it could take without cutting
// a young handshake (one under MinEvictAge, of a source that is no
// suspect): it stops accepting and holds that newcomer until a place may
// have come free, at most SlotWait. The connections behind it wait in the
// kernel's backlog, which bounds them (the listen backlog) at no cost to
// the server's memory, and which hands them over oldest first. Accepting
// and closing them instead cut nothing loose: each came back at once, and
// under a reconnect storm of a cluster's own nodes (thousands at once,
// each proving itself only at the end of its handshake) the newest cut
// the handshakes of the ones before, so that few ever finished.
//
// A newcomer of a suspect source (one whose connections were closed for
// making no call lately: a flood's, after its first round) never holds
// the door: it takes what a suspect may (the slots of other suspects'
// connections, or of connections old enough to evict) or is closed at
// once, so a flood's sources keep no node waiting once they are known.

// holdsDoor reports whether w holds its door when every place is taken.
func (l *Limiter) holdsDoor(w *listener) bool {
	return w != nil && l.cfg.SlotWait > 0
}

// freedLocked is a channel closed the next time a place may come free: a
// slot, a place in the queue or in the handshake room.
func (l *Limiter) freedLocked() <-chan struct{} {
	if l.freed == nil {
		l.freed = make(chan struct{})
	}

	return l.freed
}

// placeFreedLocked wakes the listeners holding their door: a place may
// have come free. It costs nothing while none holds it.
func (l *Limiter) placeFreedLocked() {
	if l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
}

// hold keeps raw at the door until offer gives it a place or closes it,
// offering it again each time a place may have come free, and at least
// every MinEvictAge, as young handshakes grow old enough to give theirs.
// It closes raw once SlotWait has passed without a place, or when w
// closes. It returns the connection admitted, or nil.
func (w *listener) hold(raw net.Conn, freed <-chan struct{}) *conn {
	l := w.l
	end := l.cfg.Clock.Now().Add(l.cfg.SlotWait)

	for {
		left := end.Sub(l.cfg.Clock.Now())
		if left <= 0 {
			l.refuseHeld(raw, w.Addr())

			return nil
		}

		t := l.cfg.Clock.NewTimer(min(left, MinEvictAge))

		select {
		case <-freed:
		case <-t.C():
		case <-w.closed:
			t.Stop()
			_ = raw.Close()

			return nil
		}

		t.Stop()

		c, again := l.offerHeld(raw, w, end)
		if again == nil {
			return c
		}

		freed = again
	}
}

// offerHeld offers raw, held at w's door, again; past end it closes raw
// rather than holding it on.
func (l *Limiter) offerHeld(raw net.Conn, w *listener, end time.Time) (*conn, <-chan struct{}) {
	c, freed := l.offer(raw, w.Addr(), w)
	if freed != nil && !l.cfg.Clock.Now().Before(end) {
		l.refuseHeld(raw, w.Addr())

		return nil, nil
	}

	return c, freed
}

// refuseHeld closes raw, held at the door for SlotWait in vain, and
// counts it refused.
func (l *Limiter) refuseHeld(raw net.Conn, lisAddr net.Addr) {
	src := sourceOf(raw.RemoteAddr())

	l.mu.Lock()
	refused := l.refusedLocked()
	l.mu.Unlock()

	_ = raw.Close()
	l.logRefusals(lisAddr, src, refused)
}
