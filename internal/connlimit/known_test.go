package connlimit

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// fillWithStrangers takes every anonymous slot and every place of the
// handshake room with connections that made no call.
func fillWithStrangers(t *testing.T, l *Limiter) {
	t.Helper()

	for i := range 4 + 2 {
		if c, _ := admitFrom(l, fmt.Sprintf("10.9.1.%d", i+1)); c == nil {
			t.Fatalf("stranger %d refused", i+1)
		}
	}
}

// TestKnownSourceKeepsItsHandshake: once a source proved itself, its next
// connection does its handshake in the room whatever strangers hold, and
// no stranger takes its place there, however many come.
func TestKnownSourceKeepsItsHandshake(t *testing.T) {
	l := provenLimiter(t)

	first, _ := admitFrom(l, "10.5.0.7")
	if err := l.settle(first, true); err != nil {
		t.Fatal(err)
	}

	_ = first.Close()

	fillWithCallers(t, l)
	fillWithStrangers(t, l)

	node, raw := admitFrom(l, "10.5.0.7")
	if node == nil || raw.closed.Load() {
		t.Fatal("a known source was refused while strangers held every place")
	}

	// A flood of strangers: each takes the place of another stranger's
	// handshake, never the known one's.
	for i := range 20 {
		admitFrom(l, fmt.Sprintf("10.8.0.%d", i+1))
	}

	if raw.closed.Load() {
		t.Fatal("a stranger took the place of a known source's handshake")
	}

	if err := l.settle(node, true); err != nil {
		t.Fatal(err)
	}

	if st := l.Stats(); st.Proven != 1 || st.Handshaking != 2 {
		t.Fatalf("stats %+v, want 1 proven and the room's 2 strangers handshaking", st)
	}
}

// TestKnowMarksASource: a source the server says is known (Know) needs no
// earlier proof; a Limiter without a proven table knows nobody.
func TestKnowMarksASource(t *testing.T) {
	l := provenLimiter(t)
	fillWithCallers(t, l)
	fillWithStrangers(t, l)

	l.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.9"), Port: 1234})

	if c, raw := admitFrom(l, "10.5.0.9"); c == nil || raw.closed.Load() || !c.known {
		t.Fatal("a source the server knows did not get a known place in the room")
	}

	plain := newLimiter(t, 3, 4, clock.NewFake(time.Now()))
	plain.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.9")})

	if plain.knownLocked("10.5.0.9") {
		t.Fatal("a Limiter without a proven table knows a source")
	}
}

// TestKnownSourceThatProvesNothing: a known source's handshake that proves
// nothing takes a free anonymous slot, is refused when there is none, and
// is no strike against its source (it may be joining again with a token).
func TestKnownSourceThatProvesNothing(t *testing.T) {
	l := provenLimiter(t)
	l.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.7")})
	fillWithCallers(t, l)

	for i := range SuspectStrikes + 1 {
		c, _ := admitFrom(l, "10.5.0.7")
		if c == nil || !c.known {
			t.Fatalf("attempt %d: a known source got no known place in the room", i+1)
		}

		if err := l.settle(c, false); !errors.Is(err, errAnonymousFull) {
			t.Fatalf("attempt %d: settle %v, want %v", i+1, err, errAnonymousFull)
		}
	}

	if l.suspects.has("10.5.0.7", l.cfg.Clock.Now()) {
		t.Fatal("a known source's unproven handshakes made it a suspect")
	}

	c, _ := admitFrom(l, "10.5.0.7")
	l.release(l.byAddrFor(t, "10.9.0.1"))

	if err := l.settle(c, false); err != nil {
		t.Fatalf("settle with an anonymous slot free: %v", err)
	}

	if st := l.Stats(); st.Open != 4 || st.Handshaking != 0 {
		t.Fatalf("stats %+v, want the known source in the anonymous table", st)
	}
}

// TestKnownSourcesAreBounded: a source is known for KnownFor, and at most
// MaxKnown are, the one known longest ago forgotten first.
func TestKnownSourcesAreBounded(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l := provenLimiter(t)
	l.cfg.Clock = clk

	l.mu.Lock()
	defer l.mu.Unlock()

	l.knowLocked("10.0.0.0")

	for i := range MaxKnown {
		clk.Advance(time.Millisecond)
		l.knowLocked(fmt.Sprintf("10.1.%d.%d", i>>8, i&255))
	}

	if len(l.known.at) != MaxKnown || l.knownLocked("10.0.0.0") {
		t.Fatalf("%d sources known, the first still %v; want %d, not the first", len(l.known.at), l.knownLocked("10.0.0.0"), MaxKnown)
	}

	last := fmt.Sprintf("10.1.%d.%d", (MaxKnown-1)>>8, (MaxKnown-1)&255)
	if !l.knownLocked(last) {
		t.Fatalf("%s, known last, is not known", last)
	}

	clk.Advance(KnownFor + time.Millisecond)

	if l.knownLocked(last) {
		t.Fatal("a source is still known KnownFor after its proof")
	}
}

// TestKnownSourceJoiningAgain: a known source's handshake that proves
// nothing (a node joining again with a token) takes the slot of a
// stranger's connection that made no call, as any newcomer would.
func TestKnownSourceJoiningAgain(t *testing.T) {
	l := provenLimiter(t)
	l.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.7")})

	var strangers []*fakeConn

	for i := range 4 {
		_, raw := admitFrom(l, fmt.Sprintf("10.9.1.%d", i+1))
		strangers = append(strangers, raw)
	}

	c, _ := admitFrom(l, "10.5.0.7")
	if c == nil || !c.known {
		t.Fatal("a known source got no known place in the room")
	}

	if err := l.settle(c, false); err != nil {
		t.Fatalf("a known source joining again: %v", err)
	}

	closed := 0

	for _, raw := range strangers {
		if raw.closed.Load() {
			closed++
		}
	}

	if st := l.Stats(); closed != 1 || st.Open != 4 || st.Handshaking != 0 || st.Evicted != 1 {
		t.Fatalf("%d strangers closed, stats %+v; want one evicted for the known source", closed, st)
	}
}

// TestKnownSourceWithStrikes: strikes against a known source (its
// handshakes evicted or expired under load) leave it its place in the
// room, where it proves itself; but a suspect known source's handshake
// that proves nothing takes no stranger's slot.
func TestKnownSourceWithStrikes(t *testing.T) {
	l := provenLimiter(t)
	l.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.7")})

	l.mu.Lock()
	for range SuspectStrikes {
		l.wastedLocked("10.5.0.7")
	}
	l.mu.Unlock()

	if !l.suspects.has("10.5.0.7", l.cfg.Clock.Now()) {
		t.Fatal("the strikes did not make the source a suspect")
	}

	fillWithCallers(t, l)
	fillWithStrangers(t, l)

	node, raw := admitFrom(l, "10.5.0.7")
	if node == nil || raw.closed.Load() || !node.known {
		t.Fatal("a known source with strikes got no known place in the room")
	}

	if err := l.settle(node, true); err != nil {
		t.Fatalf("its handshake proved a node certificate: %v", err)
	}

	if st := l.Stats(); st.Proven != 1 {
		t.Fatalf("stats %+v, want it proven", st)
	}

}

// TestSuspectKnownSourceTakesNoStrangersSlot: a known source's handshake
// that proves nothing takes the slot of a stranger that made no call, as
// any newcomer would; not when strikes made its source a suspect.
func TestSuspectKnownSourceTakesNoStrangersSlot(t *testing.T) {
	for _, suspect := range []bool{false, true} {
		l := provenLimiter(t)
		l.Know(&net.TCPAddr{IP: net.ParseIP("10.5.0.7")})

		if suspect {
			l.mu.Lock()
			for range SuspectStrikes {
				l.wastedLocked("10.5.0.7")
			}
			l.mu.Unlock()
		}

		// Strangers that made no call hold every anonymous slot.
		for i := range 4 {
			if c, _ := admitFrom(l, fmt.Sprintf("10.9.1.%d", i+1)); c == nil {
				t.Fatalf("stranger %d refused", i+1)
			}
		}

		c, _ := admitFrom(l, "10.5.0.7")
		if c == nil || !c.known {
			t.Fatalf("suspect %v: a known source got no known place in the room", suspect)
		}

		err := l.settle(c, false)

		switch {
		case suspect && !errors.Is(err, errAnonymousFull):
			t.Fatalf("a suspect known source's unproven handshake: settle %v, want %v", err, errAnonymousFull)
		case !suspect && err != nil:
			t.Fatalf("a known source's unproven handshake: settle %v, want a stranger's slot", err)
		}
	}
}
