// Package reclaim gives memory back to the system after a burst of open
// calls has ended. Go keeps freed heap and goroutine stacks for reuse and
// returns them to the system only slowly, and a server with nothing left
// to allocate may not even collect for minutes: after thousands of
// follows close, apid and machined would go on holding what they took.
package reclaim

import (
	"runtime/debug"
	"sync"
	"time"
)

// Delay is how long after a burst has ended the memory is reclaimed: the
// calls of a burst mostly end together (a client that goes away), and the
// rest of them have closed by then.
const Delay = time.Second

// Tracker watches a count of open calls. Once the count has climbed to at
// least its threshold and then falls to a quarter of its peak, it frees
// what the runtime holds unused, Delay later, once per such burst.
type Tracker struct {
	threshold int
	free      func()
	// after runs f after Delay; time.AfterFunc but in tests.
	after func(f func())

	mu   sync.Mutex
	peak int
}

// New returns a Tracker of bursts of at least threshold open calls.
func New(threshold int) *Tracker {
	return &Tracker{
		threshold: threshold,
		free:      freeTwice,
		after:     func(f func()) { time.AfterFunc(Delay, f) },
	}
}

// Observe takes the count after a change. The reclaim runs on a goroutine
// of its own: the caller may hold a lock, and a collection takes
// milliseconds.
func (t *Tracker) Observe(open int) {
	t.mu.Lock()
	defer t.mu.Unlock()

	if open > t.peak {
		t.peak = open

		return
	}

	if t.peak >= t.threshold && open <= t.peak/4 {
		t.peak = open
		t.after(t.free)
	}
}

// freeTwice collects and returns free memory to the system twice: what
// sync.Pools held (gRPC's buffers) survives one collection as their
// victim cache and is freed by the second.
func freeTwice() {
	debug.FreeOSMemory()
	debug.FreeOSMemory()
}
