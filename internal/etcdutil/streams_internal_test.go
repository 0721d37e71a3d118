package etcdutil

import "testing"

// TestLeastBusy picks the stream with the fewest keep-alives in flight, and
// opens another only when every open one is busy and there is room.
func TestLeastBusy(t *testing.T) {
	full := make([]int, maxKeepAliveStreams)
	for i := range full {
		full[i] = keepAlivesPerStream + i
	}

	for _, tc := range []struct {
		name     string
		inFlight []int
		best     int
		more     bool
	}{
		{"none open", nil, -1, true},
		{"one idle", []int{0}, 0, false},
		{"one below the bound", []int{keepAlivesPerStream - 1}, 0, false},
		{"one at the bound", []int{keepAlivesPerStream}, 0, true},
		{"the least busy of several", []int{9, 3, 5}, 1, false},
		{"the first of equals", []int{4, 2, 2}, 1, false},
		{"every one busy", []int{keepAlivesPerStream + 2, keepAlivesPerStream}, 1, true},
		{"every one busy, no room for more", full, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best, more := leastBusy(tc.inFlight)
			if best != tc.best || more != tc.more {
				t.Fatalf("leastBusy(%v) = %d, %v; want %d, %v", tc.inFlight, best, more, tc.best, tc.more)
			}
		})
	}
}
