package trustd

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/source"
)

func newTestLimiter(max int) (*failureLimiter, *clock.Fake) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))

	return newFailureLimiter(RateLimit{Burst: 2, Refill: time.Minute, MaxSources: max}, clk), clk
}

// lockOut fails src until it is refused.
func lockOut(t *testing.T, l *failureLimiter, src netip.Addr) {
	t.Helper()

	for range 2 {
		l.fail(src)
	}

	if l.allowed(src) {
		t.Fatalf("%s allowed after its burst", src)
	}
}

// TestLimiterFullTableSparesNewSources: a flood of failing sources many
// times the table's size never limits a source that has not failed.
func TestLimiterFullTableSparesNewSources(t *testing.T) {
	const max = 100

	l, _ := newTestLimiter(max)

	for i := range 50 * max {
		lockOut(t, l, netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))
	}

	if n := l.tracked(); n != max {
		t.Fatalf("%d sources tracked, want %d", n, max)
	}

	for _, fresh := range []string{"127.0.9.1", "10.2.0.1", "fd00:9::1"} {
		if !l.allowed(addr(fresh)) {
			t.Fatalf("%s, which never failed, is limited", fresh)
		}
	}

	// A fresh source's first failures are its own, not the flood's.
	l.fail(addr("127.0.9.1"))

	if !l.allowed(addr("127.0.9.1")) {
		t.Fatal("one failure of a fresh source locked it out")
	}
}

// TestLimiterEvictsLeastRecent: when the table is full, the source whose
// last failure is the oldest is forgotten; one that failed again lately
// stays limited.
func TestLimiterEvictsLeastRecent(t *testing.T) {
	l, clk := newTestLimiter(3)
	a, b, c, d := addr("10.0.0.1"), addr("10.0.0.2"), addr("10.0.0.3"), addr("10.0.0.4")

	lockOut(t, l, a)
	clk.Advance(time.Second)
	lockOut(t, l, b)
	clk.Advance(time.Second)
	lockOut(t, l, c)
	clk.Advance(time.Second)
	l.fail(a) // a is now the most recent, b the least

	l.fail(d)

	for _, tc := range []struct {
		src     netip.Addr
		allowed bool
	}{{a, false}, {b, true}, {c, false}, {d, true}} {
		if l.allowed(tc.src) != tc.allowed {
			t.Errorf("%s allowed %v, want %v", tc.src, !tc.allowed, tc.allowed)
		}
	}
}

// TestLimiterRefusedAttemptIsRecent: a locked-out source that keeps
// knocking stays tracked; checking a source that is allowed does not make
// it recent.
func TestLimiterRefusedAttemptIsRecent(t *testing.T) {
	l, clk := newTestLimiter(3)
	a, b, c := addr("10.0.0.1"), addr("10.0.0.2"), addr("10.0.0.3")

	lockOut(t, l, a)
	clk.Advance(time.Second)
	lockOut(t, l, b)
	clk.Advance(time.Second)
	l.fail(c) // one failure left; most recent first: c, b, a

	if l.allowed(a) || !l.allowed(c) {
		t.Fatal("a allowed or c refused")
	}

	// Now a, c, b: the next two new sources push out b, then c.
	tracked := func(src netip.Addr) bool { _, ok := l.sources[source.Block(src)]; return ok }

	l.fail(addr("10.0.0.4"))

	if tracked(b) || !tracked(a) || !tracked(c) {
		t.Fatalf("after one eviction: a %v, b %v, c %v tracked", tracked(a), tracked(b), tracked(c))
	}

	l.fail(addr("10.0.0.5"))

	if tracked(c) || !tracked(a) || l.allowed(a) {
		t.Fatalf("after two evictions: a %v, c %v tracked", tracked(a), tracked(c))
	}
}

func TestLimiterRefill(t *testing.T) {
	l, clk := newTestLimiter(10)
	a := addr("10.0.0.1")

	lockOut(t, l, a)
	clk.Advance(time.Minute)

	if !l.allowed(a) {
		t.Fatal("not forgiven after a refill")
	}
}

// TestLimiterGroupsIPv6By64: a host failing from addresses across its /64
// is one source (internal/source), locked out as one; the next /64 is not.
func TestLimiterGroupsIPv6By64(t *testing.T) {
	l, _ := newTestLimiter(10)

	for i := range 1000 {
		l.fail(addr(fmt.Sprintf("2001:db8:0:7::%x", i+1)))
	}

	if l.tracked() != 1 || l.allowed(addr("2001:db8:0:7::beef")) || !l.allowed(addr("2001:db8:0:8::1")) {
		t.Fatalf("one /64's failures: %d sources tracked", l.tracked())
	}
}
