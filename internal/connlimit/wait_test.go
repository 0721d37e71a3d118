package connlimit

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// waitingLimiter is a Limiter whose connections wait up to a second for a
// slot, with a fake clock, and one of its listeners fed by conns.
func waitingLimiter(t *testing.T, perSource, total, maxWaiting int) (*Limiter, *clock.Fake, net.Listener, chan net.Conn) {
	t.Helper()

	clk := clock.NewFake(time.Unix(1_700_000_000, 0))

	l, err := New(Config{
		PerSource: perSource, Total: total, FirstCall: time.Minute, Clock: clk,
		SlotWait: time.Second, MaxWaiting: maxWaiting,
	})
	if err != nil {
		t.Fatal(err)
	}

	conns := make(chan net.Conn, 16)
	lis := l.Wrap(fakeListener{conns: conns})

	t.Cleanup(func() { _ = lis.Close() })

	return l, clk, lis, conns
}

// accept returns the next connection lis hands out, failing the test when
// none comes within a few seconds.
func accept(t *testing.T, lis net.Listener) net.Conn {
	t.Helper()

	got := make(chan net.Conn, 1)

	go func() {
		c, err := lis.Accept()
		if err != nil {
			t.Errorf("Accept: %v", err)
		}
		got <- c
	}()

	select {
	case c := <-got:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("Accept returned nothing")

		return nil
	}
}

// waitUntil polls cond for a few seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()

	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}

		time.Sleep(time.Millisecond)
	}
}

func waiting(l *Limiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()

	return len(l.waiting)
}

// fill offers one connection from each of ips, accepts them all and has
// each make a call, so that none can be evicted.
func fill(t *testing.T, lis net.Listener, conns chan<- net.Conn, ips ...string) []net.Conn {
	t.Helper()

	var open []net.Conn

	for _, ip := range ips {
		conns <- newFake(ip)

		c := accept(t, lis)
		c.(*conn).markCalled()
		open = append(open, c)
	}

	return open
}

// TestFullTableWaitsForASlot: with every slot taken by connections that
// made a call (nothing to evict), new connections wait instead of
// being refused, and take freed slots oldest first.
func TestFullTableWaitsForASlot(t *testing.T) {
	l, _, lis, conns := waitingLimiter(t, 1, 2, 4)
	open := fill(t, lis, conns, "127.0.0.2", "127.0.0.3")

	first, second := newFake("127.0.0.4"), newFake("127.0.0.5")
	conns <- first
	conns <- second

	waitUntil(t, "two connections waiting", func() bool { return waiting(l) == 2 })

	for i, want := range []*fakeConn{first, second} {
		_ = open[i].Close()

		if got := accept(t, lis); got.RemoteAddr() != want.remote {
			t.Fatalf("slot %d went to %v, want the older waiter %v", i, got.RemoteAddr(), want.remote)
		}
	}

	if first.closed.Load() || second.closed.Load() {
		t.Fatal("a waiter was closed")
	}

	if got := l.Stats(); got.Open != 2 || got.Waited != 2 || got.Refused != 0 {
		t.Fatalf("stats %+v, want 2 open, 2 waited, none refused", got)
	}
}

// TestWaitRunsOut: a connection that gets no slot within SlotWait is
// refused, and counted so.
func TestWaitRunsOut(t *testing.T) {
	l, clk, lis, conns := waitingLimiter(t, 1, 2, 4)
	fill(t, lis, conns, "127.0.0.2", "127.0.0.3")

	late := newFake("127.0.0.4")
	conns <- late

	waitUntil(t, "a connection waiting", func() bool { return waiting(l) == 1 })

	// The wait's timer (the FirstCall watches ended with the calls).
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Second)

	waitUntil(t, "the waiter refused", late.closed.Load)

	if got := l.Stats(); got.Open != 2 || got.Refused != 1 || got.Waited != 0 || waiting(l) != 0 {
		t.Fatalf("stats %+v, %d waiting; want 2 open, 1 refused, none waiting", got, waiting(l))
	}
}

// TestWaitersAreBounded: a source may not hold more than its cap counting
// its waiters, and the queue holds at most MaxWaiting; beyond either a
// connection is refused at once.
func TestWaitersAreBounded(t *testing.T) {
	l, _, lis, conns := waitingLimiter(t, 2, 3, 2)
	fill(t, lis, conns, "127.0.0.2", "127.0.0.3", "127.0.0.4")

	w1, w2, overSource, overQueue := newFake("127.0.0.5"), newFake("127.0.0.5"), newFake("127.0.0.5"), newFake("127.0.0.6")
	conns <- w1
	conns <- w2

	waitUntil(t, "two connections waiting", func() bool { return waiting(l) == 2 })

	conns <- overSource
	conns <- overQueue

	waitUntil(t, "the connections over the bounds refused", func() bool {
		return overSource.closed.Load() && overQueue.closed.Load()
	})

	if w1.closed.Load() || w2.closed.Load() || waiting(l) != 2 {
		t.Fatalf("the waiters were disturbed: %d waiting", waiting(l))
	}

	if got := l.Stats(); got.Refused != 2 {
		t.Fatalf("stats %+v, want 2 refused", got)
	}
}

// TestCloseDropsWaiters: closing the listener closes the connections
// waiting on it; Accept then fails.
func TestCloseDropsWaiters(t *testing.T) {
	l, _, lis, conns := waitingLimiter(t, 1, 2, 4)
	fill(t, lis, conns, "127.0.0.2", "127.0.0.3")

	w := newFake("127.0.0.4")
	conns <- w

	waitUntil(t, "a connection waiting", func() bool { return waiting(l) == 1 })

	close(conns) // the underlying listener ends, as a closed one does
	_ = lis.Close()

	if !w.closed.Load() || waiting(l) != 0 {
		t.Fatalf("waiter closed %v, %d waiting after Close", w.closed.Load(), waiting(l))
	}

	if _, err := lis.Accept(); err == nil {
		t.Fatal("Accept after Close returned no error")
	}
}

func TestNewRefusesBadWaitConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative wait":          {PerSource: 1, Total: 2, FirstCall: time.Second, SlotWait: -time.Second},
		"wait without a bound":   {PerSource: 1, Total: 2, FirstCall: time.Second, SlotWait: time.Second},
		"wait with a zero bound": {PerSource: 1, Total: 2, FirstCall: time.Second, SlotWait: time.Second, MaxWaiting: 0},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// tempErr is a temporary listener error, as EMFILE is.
type tempErr struct{}

func (tempErr) Error() string   { return "too many open files" }
func (tempErr) Temporary() bool { return true }
func (tempErr) Timeout() bool   { return false }

// flakyListener fails once with a temporary error, then hands out conns.
type flakyListener struct {
	fakeListener

	failed atomic.Bool
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, tempErr{}
	}

	return f.fakeListener.Accept()
}

// TestTemporaryErrorsPassThrough: a temporary error of the listener reaches
// the server (whose backoff paces its retries) and accepting goes on.
func TestTemporaryErrorsPassThrough(t *testing.T) {
	l := newLimiter(t, 1, 2, clock.NewFake(time.Now()))
	conns := make(chan net.Conn, 1)
	lis := l.Wrap(&flakyListener{fakeListener: fakeListener{conns: conns}})

	defer lis.Close() //nolint:errcheck // the test's own listener

	if _, err := lis.Accept(); !errors.As(err, new(tempErr)) {
		t.Fatalf("Accept: %v, want the temporary error", err)
	}

	conns <- newFake("127.0.0.2")

	if c := accept(t, lis); c == nil {
		t.Fatal("no connection after a temporary error")
	}
}

// TestYoungConnectionsAreSpared: with every slot taken by connections
// without a call younger than MinEvictAge, of sources that are no
// suspects (a join storm larger than the table), a newcomer waits for a
// slot rather than evicting one; once they are that old, it takes the
// oldest's slot.
func TestYoungConnectionsAreSpared(t *testing.T) {
	l, clk, lis, conns := waitingLimiter(t, 1, 2, 4)

	var storm []*fakeConn

	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		c := newFake(ip)
		conns <- c
		accept(t, lis)

		storm = append(storm, c)
	}

	waiter := newFake("127.0.0.4")
	conns <- waiter

	waitUntil(t, "a connection waiting", func() bool { return waiting(l) == 1 })

	if storm[0].closed.Load() || storm[1].closed.Load() || l.Stats().Evicted != 0 {
		t.Fatalf("a young connection was evicted: stats %+v", l.Stats())
	}

	// At the end of its wait (SlotWait is MinEvictAge here), the waiter
	// takes the slot of the oldest, now old enough.
	clk.Advance(MinEvictAge)

	if got := accept(t, lis); got.RemoteAddr() != waiter.remote {
		t.Fatalf("accepted %v, want the waiter %v", got.RemoteAddr(), waiter.remote)
	}

	if !storm[0].closed.Load() || storm[1].closed.Load() {
		t.Fatalf("evicted: oldest %v, newer %v; want the oldest only", storm[0].closed.Load(), storm[1].closed.Load())
	}
}

// TestWaiterTakesAnAgedSlot: a newcomer waiting behind young connections
// without a call takes the oldest's slot once it is MinEvictAge old,
// rather than waiting out SlotWait for a slot that a flood never frees.
func TestWaiterTakesAnAgedSlot(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))

	l, err := New(Config{PerSource: 1, Total: 2, FirstCall: time.Minute, Clock: clk, SlotWait: 2 * MinEvictAge, MaxWaiting: 4})
	if err != nil {
		t.Fatal(err)
	}

	conns := make(chan net.Conn, 4)
	lis := l.Wrap(fakeListener{conns: conns})

	t.Cleanup(func() { _ = lis.Close() })

	var flood []*fakeConn

	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		c := newFake(ip)
		conns <- c
		accept(t, lis)

		flood = append(flood, c)
	}

	joiner := newFake("127.0.0.4")
	conns <- joiner

	waitUntil(t, "the newcomer waiting", func() bool { return waiting(l) == 1 })

	// Two FirstCall watches and the waiter's timer.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	if err = clk.WaitForTimers(ctx, 3); err != nil {
		t.Fatal(err)
	}

	clk.Advance(MinEvictAge)

	if got := accept(t, lis); got.RemoteAddr() != joiner.remote {
		t.Fatalf("accepted %v, want the waiter %v", got.RemoteAddr(), joiner.remote)
	}

	if !flood[0].closed.Load() || flood[1].closed.Load() || joiner.closed.Load() {
		t.Fatalf("closed: oldest %v, newer %v, waiter %v; want the oldest only",
			flood[0].closed.Load(), flood[1].closed.Load(), joiner.closed.Load())
	}
}
