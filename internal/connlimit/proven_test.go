package connlimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// provenLimiter has 4 anonymous slots (3 a source), 4 proven ones (2 a
// source) and room for 2 handshakes beyond the anonymous slots.
func provenLimiter(t *testing.T) *Limiter {
	t.Helper()

	l, err := New(Config{
		PerSource: 3, Total: 4, FirstCall: 5 * time.Second, Clock: clock.NewFake(time.Now()),
		ProvenTotal: 4, ProvenPerSource: 2, HandshakeRoom: 2,
	})
	if err != nil {
		t.Fatal(err)
	}

	return l
}

// fillWithCallers takes every anonymous slot of l with connections that
// made a call, which are never evicted.
func fillWithCallers(t *testing.T, l *Limiter) {
	t.Helper()

	for _, ip := range []string{"10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4"} {
		c, _ := admitFrom(l, ip)
		if c == nil {
			t.Fatalf("caller from %s refused", ip)
		}

		if err := l.settle(c, false); err != nil {
			t.Fatal(err)
		}

		c.markCalled()
	}
}

func wantStats(t *testing.T, l *Limiter, open, proven, handshaking, refused int) {
	t.Helper()

	if st := l.Stats(); st.Open != open || st.Proven != proven || st.Handshaking != handshaking || st.Refused != refused {
		t.Fatalf("stats %+v, want %d open, %d proven, %d handshaking, %d refused", st, open, proven, handshaking, refused)
	}
}

// TestProvenLeaveTheAnonymousTable: a connection proven in its handshake
// frees its anonymous slot for the next newcomer, and its proven slot when
// it closes.
func TestProvenLeaveTheAnonymousTable(t *testing.T) {
	l := provenLimiter(t)
	fillWithCallers(t, l)

	// Every anonymous slot holds a caller: the node's connection does its
	// handshake in the room, then holds a proven slot.
	node, raw := admitFrom(l, "10.5.0.7")
	if node == nil || raw.closed.Load() {
		t.Fatal("a newcomer was refused while anonymous callers hold every slot")
	}

	wantStats(t, l, 4, 0, 1, 0)

	if err := l.settle(node, true); err != nil {
		t.Fatal(err)
	}

	wantStats(t, l, 4, 1, 0, 0)

	// One anonymous caller leaves; a node already in the anonymous table
	// (it came while a slot was free) moves out at its handshake's end.
	l.release(l.byAddrFor(t, "10.9.0.1"))

	second, _ := admitFrom(l, "10.5.0.8")
	if err := l.settle(second, true); err != nil {
		t.Fatal(err)
	}

	wantStats(t, l, 3, 2, 0, 0)

	if err := node.Close(); err != nil {
		t.Fatal(err)
	}

	wantStats(t, l, 3, 1, 0, 0)
}

// byAddrFor is an open anonymous connection from ip.
func (l *Limiter) byAddrFor(t *testing.T, ip string) *conn {
	t.Helper()

	l.mu.Lock()
	defer l.mu.Unlock()

	for _, c := range l.byAddr {
		if c.source == ip && c.pool == poolAnonymous {
			return c
		}
	}

	t.Fatalf("no connection from %s", ip)

	return nil
}

// TestStrangerInTheRoomIsRefused: a handshake of the room that proves
// nothing is closed while the anonymous slots are full, and counts as a
// strike: after two, its source gets no room any more. With a slot free,
// it takes it.
func TestStrangerInTheRoomIsRefused(t *testing.T) {
	l := provenLimiter(t)
	fillWithCallers(t, l)

	for i := range SuspectStrikes {
		c, _ := admitFrom(l, "10.6.0.1")
		if c == nil {
			t.Fatalf("stranger's connection %d found no room", i+1)
		}

		if err := l.settle(c, false); !errors.Is(err, errAnonymousFull) {
			t.Fatalf("settle of a stranger in the room: %v, want %v", err, errAnonymousFull)
		}

		_ = c.Close()
	}

	wantStats(t, l, 4, 0, 0, SuspectStrikes)

	if c, raw := admitFrom(l, "10.6.0.1"); c != nil || !raw.closed.Load() {
		t.Fatal("a suspect source got a place in the handshake room")
	}

	// A slot comes free: an unproven handshake of the room takes it.
	c, _ := admitFrom(l, "10.6.0.2")
	l.release(l.byAddrFor(t, "10.9.0.1"))

	if err := l.settle(c, false); err != nil {
		t.Fatalf("settle with an anonymous slot free: %v", err)
	}

	wantStats(t, l, 4, 0, 0, SuspectStrikes+1)
}

// TestHandshakeRoomIsBounded: the room holds HandshakeRoom handshakes; a
// newcomer takes the place of the oldest.
func TestHandshakeRoomIsBounded(t *testing.T) {
	l := provenLimiter(t)
	fillWithCallers(t, l)

	_, oldest := admitFrom(l, "10.6.0.1")
	admitFrom(l, "10.6.0.2")

	if c, _ := admitFrom(l, "10.6.0.3"); c == nil || !oldest.closed.Load() {
		t.Fatal("a newcomer to a full room did not take the oldest's place")
	}

	if st := l.Stats(); st.Handshaking != 2 || st.Evicted != 1 {
		t.Fatalf("stats %+v, want 2 handshaking and 1 evicted", st)
	}
}

// TestProvenCaps: a source holds at most ProvenPerSource proven
// connections; one more stays anonymous. When the proven table is full,
// the room is closed.
func TestProvenCaps(t *testing.T) {
	l := provenLimiter(t)

	for range 3 {
		c, _ := admitFrom(l, "10.5.0.7")
		if err := l.settle(c, true); err != nil {
			t.Fatal(err)
		}
	}

	wantStats(t, l, 1, 2, 0, 0)

	for _, ip := range []string{"10.5.0.8", "10.5.0.9"} {
		c, _ := admitFrom(l, ip)
		if err := l.settle(c, true); err != nil {
			t.Fatal(err)
		}
	}

	wantStats(t, l, 1, 4, 0, 0)

	// Fill the anonymous slots with callers: with the proven table full,
	// a newcomer gets no room.
	for _, ip := range []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"} {
		c, _ := admitFrom(l, ip)
		c.markCalled()
	}

	l.byAddrFor(t, "10.5.0.7").markCalled()

	if c, raw := admitFrom(l, "10.5.0.10"); c != nil || !raw.closed.Load() {
		t.Fatal("a newcomer got room with the proven table full")
	}
}

// TestProvenCallsAreSeen: a proven connection is still found by its
// addresses, so its calls are seen and the FirstCall deadline spares it,
// as it spares an anonymous connection that called.
func TestProvenCallsAreSeen(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l, err := New(Config{
		PerSource: 3, Total: 4, FirstCall: 5 * time.Second, Clock: clk,
		ProvenTotal: 4, ProvenPerSource: 2, HandshakeRoom: 2,
	})
	if err != nil {
		t.Fatal(err)
	}

	c, raw := admitFrom(l, "10.5.0.7")
	if err := l.settle(c, true); err != nil {
		t.Fatal(err)
	}

	if got := l.lookup(raw.remote, fakeLocal); got != c {
		t.Fatal("a proven connection is not found by its addresses: its calls would go unseen")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	c.markCalled()
	clk.Advance(time.Minute)

	if raw.closed.Load() || l.Stats().Proven != 1 {
		t.Fatalf("a proven connection that called was closed at FirstCall: %+v", l.Stats())
	}

	// One that never calls is closed like any other.
	idle, idleRaw := admitFrom(l, "10.5.0.8")
	if err := l.settle(idle, true); err != nil {
		t.Fatal(err)
	}

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Minute)
	waitUntil(t, "the idle proven connection closed", idleRaw.closed.Load)

	if st := l.Stats(); st.Proven != 1 || st.Expired != 1 {
		t.Fatalf("stats %+v, want 1 proven left and 1 expired", st)
	}
}

func TestNewRefusesBadProvenConfig(t *testing.T) {
	base := Config{PerSource: 1, Total: 10, FirstCall: time.Second}

	for name, mod := range map[string]func(*Config){
		"negative":                 func(c *Config) { c.ProvenTotal = -1 },
		"no proven per-source cap": func(c *Config) { c.ProvenTotal, c.HandshakeRoom = 10, 1 },
		"one node takes all":       func(c *Config) { c.ProvenTotal, c.ProvenPerSource, c.HandshakeRoom = 10, 10, 1 },
		"no handshake room":        func(c *Config) { c.ProvenTotal, c.ProvenPerSource = 10, 2 },
		"room over the table":      func(c *Config) { c.ProvenTotal, c.ProvenPerSource, c.HandshakeRoom = 10, 2, 11 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			mod(&cfg)

			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

// TestRoomKeepsThePerSourceCap: a source at its anonymous cap gets no
// room, whatever the table holds.
func TestRoomKeepsThePerSourceCap(t *testing.T) {
	l := provenLimiter(t)

	for range 3 {
		c, _ := admitFrom(l, "10.6.0.1")
		c.markCalled()
	}

	c, _ := admitFrom(l, "10.9.0.1")
	c.markCalled()

	if c, raw := admitFrom(l, "10.6.0.1"); c != nil || !raw.closed.Load() {
		t.Fatal("a source at its cap got a place in the handshake room")
	}

	if c, _ := admitFrom(l, "10.6.0.2"); c == nil {
		t.Fatal("another source got no room with the table full of callers")
	}
}
