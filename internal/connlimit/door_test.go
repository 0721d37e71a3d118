package connlimit

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// doorLimiter has 4 anonymous slots (2 a source), a queue of 2, room for
// 2 handshakes and 64 proven slots, with a fake clock that the tests
// never advance: whatever gets in, gets in within SlotWait.
func doorLimiter(t *testing.T) (*Limiter, net.Listener, chan net.Conn) {
	t.Helper()

	l, _, lis, conns := doorLimiterClock(t)

	return l, lis, conns
}

// doorLimiterClock is doorLimiter with its clock.
func doorLimiterClock(t *testing.T) (*Limiter, *clock.Fake, net.Listener, chan net.Conn) {
	t.Helper()

	clk := clock.NewFake(time.Unix(1_700_000_000, 0))

	l, err := New(Config{
		PerSource: 2, Total: 4, FirstCall: time.Minute, Clock: clk,
		SlotWait: 2 * time.Second, MaxWaiting: 2,
		ProvenTotal: 64, ProvenPerSource: 2, HandshakeRoom: 2,
	})
	if err != nil {
		t.Fatal(err)
	}

	conns := make(chan net.Conn, 64)
	lis := l.Wrap(fakeListener{conns: conns})

	t.Cleanup(func() { _ = lis.Close() })

	return l, clk, lis, conns
}

// doorHeld reports whether a newcomer waits at one of l's doors.
func doorHeld(l *Limiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.freed != nil
}

// TestReconnectStormGetsInAtTheDoor: with every anonymous slot held by a
// caller, a storm of nodes reconnecting at once, many more than the queue
// and the handshake room hold, all get their handshakes done and move to
// the proven table within SlotWait, none closed or evicted on the way,
// while strangers among them that prove nothing are closed and the
// anonymous table stays at its cap.
func TestReconnectStormGetsInAtTheDoor(t *testing.T) {
	l, lis, conns := doorLimiter(t)
	callers := fill(t, lis, conns, "10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4")

	const nodes = 24

	var storm, strangers []*fakeConn

	for i := range nodes {
		c := newFake(fmt.Sprintf("10.1.0.%d", i+1))
		storm = append(storm, c)
		conns <- c

		if i%8 == 7 {
			s := newFake(fmt.Sprintf("10.6.0.%d", i+1))
			strangers = append(strangers, s)
			conns <- s
		}
	}

	// Before any handshake ends: two in the room, two queued, the next
	// held at the door, the rest in the backlog; nothing closed.
	waitUntil(t, "a newcomer held at the door", func() bool { return doorHeld(l) && waiting(l) == 2 })

	if st := l.Stats(); st.Handshaking != 2 || st.Refused != 0 || st.Evicted != 0 {
		t.Fatalf("stats %+v, want 2 handshaking and nothing refused or evicted", st)
	}

	isStranger := map[net.Addr]bool{}
	for _, s := range strangers {
		isStranger[s.remote] = true
	}

	// Handshakes end one after the other, in the order they got a place.
	for range nodes + len(strangers) {
		c := accept(t, lis).(*conn)

		if isStranger[c.RemoteAddr()] {
			if err := l.settle(c, false); err == nil {
				t.Fatalf("a stranger from %v settled while every anonymous slot holds a caller", c.RemoteAddr())
			}

			_ = c.Close()

			continue
		}

		if err := l.settle(c, true); err != nil {
			t.Fatalf("node %v: %v", c.RemoteAddr(), err)
		}

		c.markCalled()
	}

	for _, c := range storm {
		if c.closed.Load() {
			t.Fatalf("node %v was closed during the storm", c.remote)
		}
	}

	for _, c := range callers {
		if c.(*conn).Conn.(*fakeConn).closed.Load() {
			t.Fatalf("caller %v lost its slot", c.RemoteAddr())
		}
	}

	if st := l.Stats(); st.Proven != nodes || st.Open != 4 || st.Handshaking != 0 || st.Evicted != 0 || st.Refused != len(strangers) {
		t.Fatalf("stats %+v, want %d proven, 4 open, none handshaking or evicted, %d refused", st, nodes, len(strangers))
	}
}

// TestSuspectsDoNotHoldTheDoor: when every place is taken by young
// handshakes, a newcomer of a suspect source is closed at once and
// leaves the door to the next, and a young handshake is never cut for it.
func TestSuspectsDoNotHoldTheDoor(t *testing.T) {
	l, lis, conns := doorLimiter(t)

	fillWithHandshakes(t, lis, conns)
	waitUntil(t, "two waiting", func() bool { return waiting(l) == 2 })

	l.mu.Lock()
	for range SuspectStrikes {
		l.suspects.strike("10.6.0.1", l.cfg.Clock.Now())
	}
	l.mu.Unlock()

	suspect, node := newFake("10.6.0.1"), newFake("10.1.0.9")
	conns <- suspect
	conns <- node

	waitUntil(t, "the suspect closed", suspect.closed.Load)
	waitUntil(t, "the node held at the door", func() bool { return doorHeld(l) })

	if st := l.Stats(); st.Evicted != 0 || st.Refused != 1 || node.closed.Load() {
		t.Fatalf("stats %+v, node closed %v: want the suspect refused and nothing evicted", st, node.closed.Load())
	}
}

// fillWithHandshakes takes every place of a doorLimiter with handshakes
// that have not ended: four in the table, two in the queue, two in the
// room; it returns those of the table, oldest first.
func fillWithHandshakes(t *testing.T, lis net.Listener, conns chan<- net.Conn) []*fakeConn {
	t.Helper()

	var table []*fakeConn

	for i := range 8 {
		c := newFake(fmt.Sprintf("10.1.0.%d", i+1))
		conns <- c

		switch {
		case i < 4:
			accept(t, lis)

			table = append(table, c)
		case i >= 6:
			accept(t, lis)
		}
	}

	return table
}

// TestHandshakesAreNotEvicted: a waiting newcomer never takes the slot
// of a connection still in its handshake, however long it takes (busy
// cores under a reconnect storm), only of one idle MinEvictAge since its
// handshake ended.
func TestHandshakesAreNotEvicted(t *testing.T) {
	l, clk, lis, conns := doorLimiterClock(t)
	table := fillWithHandshakes(t, lis, conns)

	waitUntil(t, "two waiting", func() bool { return waiting(l) == 2 })

	// The oldest ends its handshake without proving a node, and makes no
	// call.
	oldest := l.byAddrFor(t, "10.1.0.1")
	if err := l.settle(oldest, false); err != nil {
		t.Fatal(err)
	}

	// Six FirstCall watches and the two waiters' timers.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 8); err != nil {
		t.Fatal(err)
	}

	clk.Advance(MinEvictAge)

	waitUntil(t, "the idle connection evicted", table[0].closed.Load)

	for _, c := range table[1:] {
		if c.closed.Load() {
			t.Fatalf("the handshake of %v was cut", c.remote)
		}
	}

	if st := l.Stats(); st.Evicted != 1 || st.Handshaking != 2 {
		t.Fatalf("stats %+v, want one evicted and two handshaking", st)
	}
}
