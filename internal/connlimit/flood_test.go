package connlimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// floodSource is the i-th of a flood's many source addresses.
func floodSource(i int) string {
	return fmt.Sprintf("127.%d.%d.%d", 100+i/62500, i/250%250, 1+i%250)
}

// TestFloodFromManySources: a flood from more sources than slots, one or
// two connections each and none making a call, takes no slot from the
// connections that made calls, never locks out a newcomer, and churns only
// its own connections, oldest first.
func TestFloodFromManySources(t *testing.T) {
	const (
		perSource = 4
		total     = 64
		callers   = 16
		sources   = 2000
	)

	l := newLimiter(t, perSource, total, clock.NewFake(time.Now()))

	var kept []*fakeConn

	for i := range callers {
		c, raw := admitFrom(l, fmt.Sprintf("127.0.0.%d", 2+i/2))
		c.markCalled()

		kept = append(kept, raw)
	}

	var flood []*fakeConn

	flooding := func(from, to int) {
		t.Helper()

		for i := from; i < to; i++ {
			for range 1 + i%2 {
				c, raw := admitFrom(l, floodSource(i))
				if c == nil {
					t.Fatalf("flood source %d refused with %d open", i, l.Stats().Open)
				}

				flood = append(flood, raw)
			}
		}
	}

	flooding(0, sources/2)

	// A joiner in the middle of the flood gets a slot at once, and keeps
	// it once it has made its call, however many sources come after.
	joiner, joinerRaw := admitFrom(l, "127.0.1.1")
	if joiner == nil {
		t.Fatal("a newcomer was refused during the flood")
	}

	joiner.markCalled()

	kept = append(kept, joinerRaw)

	flooding(sources/2, sources)

	for i, raw := range kept {
		if raw.closed.Load() {
			t.Fatalf("connection %d, which made a call, was evicted", i)
		}
	}

	// The flood holds the slots left, with its newest connections.
	left := total - len(kept)
	for i, raw := range flood {
		if want := i < len(flood)-left; raw.closed.Load() != want {
			t.Fatalf("flood connection %d of %d: closed %v, want %v (the oldest are evicted first)", i, len(flood), raw.closed.Load(), want)
		}
	}

	if got := l.Stats(); got.Open != total || got.Refused != 0 || got.Evicted != len(flood)-left {
		t.Fatalf("stats %+v, want %d open, none refused, %d evicted", got, total, len(flood)-left)
	}

	// Nothing is kept of the evicted connections.
	l.mu.Lock()
	defer l.mu.Unlock()

	if len(l.byAddr) != total || l.uncalled.Len() > total {
		t.Fatalf("%d connections in the table and %d in the eviction list, want %d at most", len(l.byAddr), l.uncalled.Len(), total)
	}
}
