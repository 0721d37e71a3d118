// Package clock gives components a source of time they can be handed in
// their config, so that expiry and rotation logic runs against a fake clock in
// tests and never sleeps.
package clock

import (
	"context"
	"time"
)

// Clock is the time source of a component. The zero-dependency interfaces that
// components declare (usually just Now) are subsets of it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once d has elapsed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of time.Timer a component uses.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was still pending.
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

func (r realTimer) Stop() bool { return r.t.Stop() }

// Sleep waits d on c. It reports true when the time passed, false when ctx
// ended first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
