package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// variant is one case of a comparison: calls calls of call, timed one by
// one.
type variant struct {
	name  string
	calls int
	call  func(context.Context) error
	// meters are sets of processes whose CPU time the calls are charged
	// with, each measured on its own: the Case's CPU (every process
	// involved), then its ServerCPU (the server alone).
	meters [][]int
}

// sample is what compare measured of one variant.
type sample struct {
	lat []time.Duration
	// cpu is the CPU time of each meter's processes over the timed calls.
	cpu []time.Duration
}

// Case summarizes the sample, with the meters' CPU times per call.
func (s sample) Case() Case {
	return Case{Summary: Summarize(s.lat), CPU: s.perCall(0), ServerCPU: s.perCall(1)}
}

// perCall is meter i's CPU time per call; zero if not measured.
func (s sample) perCall(i int) time.Duration {
	if i >= len(s.cpu) || len(s.lat) == 0 {
		return 0
	}

	return s.cpu[i] / time.Duration(len(s.lat))
}

// compare times the variants' calls one after the other, interleaved in
// rounds: each round gives every variant its share of calls in turn. A
// variant stops early once its calls have taken budget in all. Each variant
// makes one untimed call first, to warm connections and caches. The first
// failing call ends the comparison.
func compare(ctx context.Context, rounds int, budget time.Duration, vs ...variant) ([]sample, error) {
	out := make([]sample, len(vs))
	spent := make([]time.Duration, len(vs))

	for i, v := range vs {
		if err := timedCall(ctx, v.call, nil); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", v.name, err)
		}

		out[i] = sample{lat: make([]time.Duration, 0, v.calls), cpu: make([]time.Duration, len(v.meters))}
	}

	for round := range rounds {
		for i, v := range vs {
			share := v.calls*(round+1)/rounds - v.calls*round/rounds
			if share == 0 || spent[i] >= budget {
				continue
			}

			before := readMeters(v.meters)
			n := len(out[i].lat)

			if err := timedCalls(ctx, v.call, share, budget-spent[i], &out[i].lat); err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}

			for m, after := range readMeters(v.meters) {
				out[i].cpu[m] += after - before[m]
			}

			for _, d := range out[i].lat[n:] {
				spent[i] += d
			}
		}
	}

	return out, nil
}

// readMeters reads the CPU time of each meter's processes.
func readMeters(meters [][]int) []time.Duration {
	out := make([]time.Duration, len(meters))
	for i, pids := range meters {
		out[i] = cpuTime(pids)
	}

	return out
}

// timedCalls makes up to n calls, until they have taken budget.
func timedCalls(ctx context.Context, call func(context.Context) error, n int, budget time.Duration, into *[]time.Duration) error {
	var spent time.Duration

	for range n {
		if spent >= budget {
			return nil
		}

		if err := timedCall(ctx, call, into); err != nil {
			return err
		}

		spent += (*into)[len(*into)-1]
	}

	return nil
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
