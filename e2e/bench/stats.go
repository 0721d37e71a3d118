package bench

import (
	"slices"
	"time"
)

// Summary describes a sample of latencies. Percentiles are nearest-rank:
// each is a latency that was measured, never an interpolation.
type Summary struct {
	N      int           `json:"n"`
	Median time.Duration `json:"median_ns"`
	P99    time.Duration `json:"p99_ns"`
	Mean   time.Duration `json:"mean_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
}

// Summarize describes samples; it sorts a copy, so the caller's order stays.
// An empty sample gives the zero Summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}

	sorted := slices.Clone(samples)
	slices.Sort(sorted)

	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}

	return Summary{
		N:      len(sorted),
		Median: Percentile(sorted, 50),
		P99:    Percentile(sorted, 99),
		Mean:   sum / time.Duration(len(sorted)),
		Min:    sorted[0],
		Max:    sorted[len(sorted)-1],
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of an
// ascending sample: the smallest value with at least p percent of the
// sample at or below it, rank ceil(p*n/100). An empty sample gives zero.
func Percentile(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}

	rank := min(max((p*n+99)/100, 1), n)

	return sorted[rank-1]
}

// PerSecond is the rate of calls made one after the other: one over the
// mean latency. Zero for an empty sample.
func (s Summary) PerSecond() float64 {
	if s.Mean <= 0 {
		return 0
	}

	return float64(time.Second) / float64(s.Mean)
}

// Ratio is a / b, or zero when b is zero (a figure that was not measured
// must not turn into an infinite ratio).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}

	return a / b
}

// Rate is count events over elapsed, per second; zero if nothing elapsed.
func Rate(count int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}

	return float64(count) / elapsed.Seconds()
}
