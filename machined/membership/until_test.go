package membership_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/membership"
)

// TestUntilBacksOff: failed heartbeats are tried again after about
// RetryInterval, then after waits that grow to the interval, never
// beyond it; once a heartbeat is answered the next comes an interval
// later, and a failure after that starts again from RetryInterval.
func TestUntilBacksOff(t *testing.T) {
	const interval = 10 * time.Second

	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())

	// Beats 1-6 fail, 7 is answered, 8 fails.
	beats := make(chan time.Time, 16)
	n := 0
	beat := func(context.Context) error {
		n++
		beats <- clk.Now()

		if n <= 6 || n == 8 {
			return errors.New("refused")
		}

		return nil
	}

	var wg sync.WaitGroup

	wg.Go(func() { membership.Until(ctx, clk, interval, slog.New(slog.DiscardHandler), beat) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// next advances the clock in steps until the next beat.
	next := func() time.Time {
		t.Helper()

		for range 2 * int(interval/(100*time.Millisecond)) {
			select {
			case at := <-beats:
				return at
			default:
			}

			if err := clk.WaitForTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}

			clk.Advance(100 * time.Millisecond)
		}

		select {
		case at := <-beats:
			return at
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat within twice the interval")

			return time.Time{}
		}
	}

	prev := next()

	var waits []time.Duration

	for range 8 {
		at := next()
		waits = append(waits, at.Sub(prev))
		prev = at
	}

	// waits[i] follows beat i+1: failures for i < 6, the answer at 6, a
	// failure at 7.
	const step = 100 * time.Millisecond

	if w := waits[0]; w < membership.RetryInterval/2 || w > membership.RetryInterval+step {
		t.Errorf("first retry after %s, want about %s", w, membership.RetryInterval)
	}

	if w := waits[4]; w <= 2*membership.RetryInterval {
		t.Errorf("fifth retry after %s: the waits did not grow (%v)", w, waits)
	}

	for i, w := range waits {
		if w > interval+step {
			t.Errorf("wait %d is %s, beyond the interval %s", i, w, interval)
		}
	}

	if w := waits[6]; w < interval || w > interval+step {
		t.Errorf("after an answered heartbeat the next came in %s, want %s", w, interval)
	}

	if w := waits[7]; w > membership.RetryInterval+step {
		t.Errorf("a failure after an answer was tried again in %s, want about %s", w, membership.RetryInterval)
	}
}
