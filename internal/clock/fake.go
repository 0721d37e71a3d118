package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock that moves only when a test calls Advance or Set. Tests of
// rotation loops wait for the loop to arm its timer (WaitForTimers) and then
// advance past it, so they never sleep.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever timers are added
}

// NewFake returns a fake clock reading now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()

	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()

	t := &fakeTimer{clock: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.fire(f.now)

		return t
	}

	f.timers = append(f.timers, t)
	close(f.changed)
	f.changed = make(chan struct{})

	return t
}

// Advance moves the fake time forward by d and fires every timer now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.fireDueLocked()
	f.mu.Unlock()
}

// Set moves the fake time to t (forwards or backwards) and fires every timer now due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.fireDueLocked()
	f.mu.Unlock()
}

// Pending returns how many timers are armed and not yet fired or stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()

	return len(f.timers)
}

// WaitForTimers blocks until at least n timers are pending or ctx ends.
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		pending, changed := len(f.timers), f.changed
		f.mu.Unlock()

		if pending >= n {
			return nil
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) fireDueLocked() {
	kept := f.timers[:0]

	for _, t := range f.timers {
		if t.at.After(f.now) {
			kept = append(kept, t)

			continue
		}

		t.fire(f.now)
	}

	f.timers = kept
}

func (f *Fake) stop(t *fakeTimer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()

	for i, armed := range f.timers {
		if armed == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)

			return true
		}
	}

	return false
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	c     chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool { return t.clock.stop(t) }

func (t *fakeTimer) fire(now time.Time) {
	select {
	case t.c <- now:
	default:
	}
}
