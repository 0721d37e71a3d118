package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}

	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}

	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of odd count", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"median of even count is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", hundred, 99, 99 * time.Millisecond},
		{"p100 is the largest", hundred, 100, 100 * time.Millisecond},
		{"p99 of 10 is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p50 of 10 is the 5th", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 50, 5 * time.Millisecond},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(p%d) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	samples := ms(5, 1, 4, 2, 3)
	got := Summarize(samples)

	want := Summary{N: 5, Median: 3 * time.Millisecond, P99: 5 * time.Millisecond, Mean: 3 * time.Millisecond, Min: time.Millisecond, Max: 5 * time.Millisecond}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}

	if !slices.Equal(samples, ms(5, 1, 4, 2, 3)) {
		t.Fatalf("Summarize reordered its input: %v", samples)
	}

	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) is not the zero Summary")
	}
}

func TestRates(t *testing.T) {
	tests := []struct {
		name      string
		got, want float64
	}{
		{"per second from the mean", Summarize(ms(1, 3)).PerSecond(), 500},
		{"per second of nothing", Summary{}.PerSecond(), 0},
		{"rate", Rate(200, 2*time.Second), 100},
		{"rate over no time", Rate(5, 0), 0},
		{"ratio", Ratio(3, 4), 0.75},
		{"ratio to an unmeasured figure", Ratio(3, 0), 0},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if math.Abs(tt.got-tt.want) > 1e-9 {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestCompareInterleavesAndBounds(t *testing.T) {
	var order []string

	call := func(name string) func(context.Context) error {
		return func(context.Context) error {
			order = append(order, name)

			return nil
		}
	}

	lat, err := compare(context.Background(), 2, time.Minute,
		variant{"a", 4, call("a"), nil}, variant{"b", 2, call("b"), nil})
	if err != nil {
		t.Fatal(err)
	}

	// One warm-up call each, then per round a's half and b's half.
	want := []string{"a", "b", "a", "a", "b", "a", "a", "b"}
	if !slices.Equal(order, want) {
		t.Fatalf("call order %v, want %v", order, want)
	}

	if len(lat[0].lat) != 4 || len(lat[1].lat) != 2 {
		t.Fatalf("samples %d and %d, want 4 and 2", len(lat[0].lat), len(lat[1].lat))
	}

	slow := func(context.Context) error { time.Sleep(2 * time.Millisecond); return nil }
	if lat, err = compare(context.Background(), 1, time.Millisecond, variant{"slow", 100, slow, nil}); err != nil || len(lat[0].lat) != 1 {
		t.Fatalf("over budget: %v, %v; want 1 sample", lat, err)
	}
}

func TestCompareStopsOnFailure(t *testing.T) {
	calls := 0
	boom := errors.New("boom")

	_, err := compare(context.Background(), 1, time.Minute, variant{"failing", 10, func(context.Context) error {
		calls++
		if calls == 3 {
			return boom
		}

		return nil
	}, nil})
	if !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("err = %v after %d calls, want boom after 3", err, calls)
	}
}

func TestParallelCountsCalls(t *testing.T) {
	n, elapsed, err := parallel(context.Background(), 4, 100, time.Minute, func(context.Context) error { return nil })
	if err != nil || n != 100 || elapsed <= 0 {
		t.Fatalf("parallel = %d calls in %v, %v; want 100", n, elapsed, err)
	}
}

func TestCompareChargesCPU(t *testing.T) {
	busy := func(context.Context) error {
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}

		return nil
	}

	lat, err := compare(context.Background(), 2, time.Minute, variant{"busy", 10, busy, [][]int{{os.Getpid()}}})
	if err != nil {
		t.Fatal(err)
	}

	// A millisecond of spinning per call, give or take the machine's load.
	if c := lat[0].Case(); c.CPU < 500*time.Microsecond || c.CPU > 50*time.Millisecond {
		t.Fatalf("CPU per call %v, want about 1ms", c.CPU)
	}
}
