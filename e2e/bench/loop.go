package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// variant is one case of a comparison: calls calls of call, timed one by one.
type variant struct {
	name  string
	calls int
	call  func(context.Context) error
}

// compare times the variants' calls one after the other, interleaved in
// rounds: each round gives every variant its share of calls in turn. A
// variant stops early once its calls have taken budget in all. Each variant
// makes one untimed call first, to warm connections and caches. The first
// failing call ends the comparison.
func compare(ctx context.Context, rounds int, budget time.Duration, vs ...variant) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(vs))
	spent := make([]time.Duration, len(vs))

	for i, v := range vs {
		if err := timedCall(ctx, v.call, nil); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", v.name, err)
		}

		out[i] = make([]time.Duration, 0, v.calls)
	}

	for round := range rounds {
		for i, v := range vs {
			share := v.calls*(round+1)/rounds - v.calls*round/rounds

			for range share {
				if spent[i] >= budget {
					break
				}

				if err := timedCall(ctx, v.call, &out[i]); err != nil {
					return nil, fmt.Errorf("%s: %w", v.name, err)
				}

				spent[i] += out[i][len(out[i])-1]
			}
		}
	}

	return out, nil
}

// timedCall makes one call under callTimeout and appends its latency to
// into (if not nil).
func timedCall(ctx context.Context, call func(context.Context) error, into *[]time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	start := time.Now()
	err := call(ctx)
	elapsed := time.Since(start)

	if err == nil && into != nil {
		*into = append(*into, elapsed)
	}

	return err
}

// parallel has workers callers make calls calls of call in all, within
// budget, and returns how many were made and how long they took.
func parallel(ctx context.Context, workers, calls int, budget time.Duration, call func(context.Context) error) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	var (
		left     = int64(calls)
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)

	start := time.Now()

	for range workers {
		wg.Go(func() {
			for atomic.AddInt64(&left, -1) >= 0 && ctx.Err() == nil {
				if err := call(ctx); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err; cancel() })
					}

					return
				}

				done.Add(1)
			}
		})
	}

	wg.Wait()

	return int(done.Load()), time.Since(start), firstErr
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
