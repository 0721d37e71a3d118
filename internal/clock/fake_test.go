package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeTimerFiresOnlyWhenDue(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	tm := f.NewTimer(10 * time.Second)

	f.Advance(9 * time.Second)

	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}

	f.Advance(time.Second)

	select {
	case got := <-tm.C():
		if !got.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("timer did not fire when due")
	}

	if f.Pending() != 0 {
		t.Fatalf("pending = %d after firing", f.Pending())
	}
}

func TestFakeTimerStop(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)

	if !tm.Stop() {
		t.Fatal("Stop on a pending timer returned false")
	}

	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}

	f.Advance(time.Hour)

	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
}

func TestFakeWaitForTimers(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)

	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- f.WaitForTimers(ctx, 2)
	}()

	f.NewTimer(time.Second)
	f.NewTimer(time.Minute)

	if err := <-done; err != nil {
		t.Fatalf("WaitForTimers: %v", err)
	}
}

func TestFakeNonPositiveDurationFiresAtOnce(t *testing.T) {
	f := NewFake(time.Unix(0, 0))

	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("zero-duration timer did not fire at once")
	}
}
