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

// manyFlood is a Limiter filled with callers, and a flood of it.
type manyFlood struct {
	t     *testing.T
	l     *Limiter
	kept  []*fakeConn // connections that must never be evicted
	flood []*fakeConn // the flood's connections, in the order made
	next  int         // the next flood source
}

const (
	manyPerSource = 4
	manyTotal     = 64
	manyCallers   = 16
	manySources   = 1000
)

func newManyFlood(t *testing.T) *manyFlood {
	f := &manyFlood{t: t, l: newLimiter(t, manyPerSource, manyTotal, clock.NewFake(time.Now()))}

	for i := range manyCallers {
		c, raw := admitFrom(f.l, fmt.Sprintf("127.0.0.%d", 2+i/2))
		c.markCalled()

		f.kept = append(f.kept, raw)
	}

	return f
}

// from makes per connections from each of n new sources, none of which
// calls; every one must be admitted.
func (f *manyFlood) from(n, per int) {
	f.t.Helper()

	for range n {
		src := floodSource(f.next)
		f.next++

		for range per {
			c, raw := admitFrom(f.l, src)
			if c == nil {
				f.t.Fatalf("flood source %s refused with %d open", src, f.l.Stats().Open)
			}

			f.flood = append(f.flood, raw)
		}
	}
}

// check fails when a connection of kept was evicted, or the table holds
// more than its slots or anything of evicted connections.
func (f *manyFlood) check() {
	f.t.Helper()

	for i, raw := range f.kept {
		if raw.closed.Load() {
			f.t.Fatalf("kept connection %d (%v) was evicted", i, raw.remote)
		}
	}

	if got := f.l.Stats(); got.Open != manyTotal {
		f.t.Fatalf("stats %+v, want %d open", got, manyTotal)
	}

	f.l.mu.Lock()
	defer f.l.mu.Unlock()

	if len(f.l.byAddr) != manyTotal || len(f.l.sources) > manyTotal {
		f.t.Fatalf("%d connections and %d sources in the table, want %d at most", len(f.l.byAddr), len(f.l.sources), manyTotal)
	}
}

// TestFloodFromManySources: a flood from many more sources than slots, one
// connection each and none making a call, is admitted at every connection
// and churns only its own, oldest first; the connections that made calls
// keep their slots.
func TestFloodFromManySources(t *testing.T) {
	f := newManyFlood(t)
	f.from(manySources, 1)
	f.check()

	if got := f.l.Stats(); got.Refused != 0 || got.Evicted != len(f.flood)-(manyTotal-len(f.kept)) {
		t.Fatalf("stats %+v, want none refused and %d evicted", got, len(f.flood)-(manyTotal-len(f.kept)))
	}

	left := manyTotal - len(f.kept)
	for i, raw := range f.flood {
		if want := i < len(f.flood)-left; raw.closed.Load() != want {
			t.Fatalf("flood connection %d of %d: closed %v, want %v (the oldest are evicted first)", i, len(f.flood), raw.closed.Load(), want)
		}
	}
}

// TestFloodSparesNewcomers: a newcomer, its source's only connection,
// keeps its slot until its call while fewer sources than slots flood, each
// as many connections as it may, even as the oldest connection without a
// call; once it made its call, it keeps it through any flood.
func TestFloodSparesNewcomers(t *testing.T) {
	f := newManyFlood(t)
	few := make([]string, (manyTotal-manyCallers)/2)

	for i := range few {
		few[i] = floodSource(manySources + i)
	}

	// Round after round, each source adds a connection until it holds its
	// cap; beyond it, it is refused.
	rounds := func(n int) {
		for range n {
			for _, src := range few {
				if c, raw := admitFrom(f.l, src); c != nil {
					f.flood = append(f.flood, raw)
				}
			}
		}
	}

	rounds(manyPerSource)

	joiner, raw := admitFrom(f.l, "127.0.1.1")
	if joiner == nil {
		t.Fatal("a newcomer was refused during the flood")
	}

	f.kept = append(f.kept, raw)

	rounds(manySources)
	f.check()

	if got := f.l.Stats(); got.Evicted == 0 {
		t.Fatalf("stats %+v: the flood never churned", got)
	}

	joiner.markCalled()
	f.from(manySources, 1)
	f.check()
}

// TestFloodSourcesBecomeSuspects: sources whose connections were evicted
// round after round lose their slots first when they come back, so a
// newcomer keeps its slot, even as the oldest connection without a call of
// sources holding one each, through a flood from many more sources than
// slots; so does one evicted once by the flood, which made a call since.
func TestFloodSourcesBecomeSuspects(t *testing.T) {
	f := newManyFlood(t)

	round := func() {
		f.next = 0
		f.from(manySources, 1)
	}

	// The flood's first connection from a newcomer's source is evicted
	// with the flood's first round; it calls over its next.
	_, evicted := admitFrom(f.l, "127.0.1.2")

	round()

	if !evicted.closed.Load() {
		t.Fatal("the first round of the flood evicted no connection without a call")
	}

	again, raw := admitFrom(f.l, "127.0.1.2")
	again.markCalled()
	f.kept = append(f.kept, raw)

	round()

	for _, ip := range []string{"127.0.1.1", "127.0.1.2"} {
		c, raw := admitFrom(f.l, ip)
		if c == nil {
			t.Fatalf("a newcomer from %s was refused during the flood", ip)
		}

		f.kept = append(f.kept, raw)
	}

	for range 3 {
		round()
		f.check()
	}
}
