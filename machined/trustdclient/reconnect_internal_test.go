package trustdclient

import (
	"bytes"
	"context"
	"encoding/binary"
	mathrand "math/rand/v2"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// draws is a Rand that yields each of ds in turn as an 8-byte draw.
func draws(ds ...time.Duration) *bytes.Reader {
	var b []byte
	for _, d := range ds {
		b = binary.BigEndian.AppendUint64(b, uint64(d))
	}

	return bytes.NewReader(b)
}

// TestPacerBacksOffWithFullJitter: after each failed attempt the next
// waits a delay drawn below a step that doubles from ReconnectBackoffMin
// to ReconnectBackoffMax; a success makes the next attempt go at once.
func TestPacerBacksOffWithFullJitter(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))

	// Each draw is taken modulo its step: 1.5 s below a 1 s step is 0.5 s.
	p := newPacer(clk, draws(1500*time.Millisecond, 3*time.Second, 3*time.Second, 9*time.Second, 20*time.Second, 0))
	want := []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second, time.Second, 4 * time.Second}

	for i, w := range want {
		p.failed()

		if got := waitFor(t, clk, p); got != w {
			t.Fatalf("wait after failure %d = %s, want %s", i+1, got, w)
		}
	}

	// A failure long past waits no more.
	p.failed()
	clk.Advance(ReconnectBackoffMax)

	if got := waitFor(t, clk, p); got != 0 {
		t.Fatalf("wait %s after a failure %s ago, want none", got, ReconnectBackoffMax)
	}

	p.succeeded()

	if got := waitFor(t, clk, p); got != 0 {
		t.Fatalf("wait after a success = %s, want none", got)
	}
}

// waitFor runs p.wait and returns how far the fake clock had to advance
// for it to return.
func waitFor(t *testing.T, clk *clock.Fake, p *pacer) time.Duration {
	t.Helper()

	p.mu.Lock()
	d := max(p.until.Sub(clk.Now()), 0)
	p.mu.Unlock()

	done := make(chan error, 1)

	go func() { done <- p.wait(t.Context()) }()

	if d > 0 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()

		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		select {
		case <-done:
			t.Fatalf("wait returned before the clock advanced %s", d)
		default:
		}

		clk.Advance(d)
	}

	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait never returned")
	}

	return d
}

// TestPacersSpreadAReconnectStorm: 5,000 nodes whose connections failed
// at the same moment come back spread evenly over the first step, not
// together: no tenth of it holds more than 12 % of them.
func TestPacersSpreadAReconnectStorm(t *testing.T) {
	const nodes, buckets = 5000, 10

	rand := mathrand.NewChaCha8([32]byte{33})
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))

	var count [buckets]int

	for range nodes {
		p := newPacer(clk, rand)
		p.failed()

		d := p.until.Sub(clk.Now())
		if d < 0 || d >= ReconnectBackoffMin {
			t.Fatalf("first wait %s outside [0, %s)", d, ReconnectBackoffMin)
		}

		count[d*buckets/ReconnectBackoffMin]++
	}

	for i, n := range count {
		if n > nodes*12/100 {
			t.Fatalf("%d of %d nodes come back in tenth %d of the first step: %v", n, nodes, i, count)
		}
	}
}
