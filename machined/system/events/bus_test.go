package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/clock"
)

func phase(name string) *machine.PhaseEvent { return &machine.PhaseEvent{Phase: name} }

func TestTailAndOrder(t *testing.T) {
	b := NewBus(4, clock.NewFake(time.Unix(0, 0)))

	for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
		b.Publish(phase(p), "")
	}

	tests := []struct {
		n    int
		want string
	}{
		{n: 2, want: "ef"},
		{n: 4, want: "cdef"},
		{n: 10, want: "cdef"},
		{n: 0, want: ""},
	}

	for _, tt := range tests {
		got := ""
		for _, ev := range b.Tail(tt.n) {
			got += ev.Payload.(*machine.PhaseEvent).Phase
		}

		if got != tt.want {
			t.Errorf("Tail(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestSlowSubscriberNeverBlocks: publishing far more events than the ring
// holds, with a subscriber that reads nothing, completes at once; the
// subscriber then learns how many it lost and continues from the oldest.
func TestSlowSubscriberNeverBlocks(t *testing.T) {
	b := NewBus(8, clock.NewFake(time.Unix(0, 0)))
	sub := b.Subscribe(b.NextSeq())

	done := make(chan struct{})

	go func() {
		for range 10_000 {
			b.Publish(phase("x"), "")
		}

		close(done)
	}()

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("publishing blocked on an idle subscriber")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := sub.Next(ctx)
	if !errors.Is(err, ErrLagged) {
		t.Fatalf("err = %v, want ErrLagged", err)
	}

	ev, err := sub.Next(ctx)
	if err != nil || ev.Seq != 10_000-7 {
		t.Fatalf("after lag: seq %d err %v, want the oldest held", ev.Seq, err)
	}
}

func TestSubscriptionWaitsForNew(t *testing.T) {
	b := NewBus(8, clock.NewFake(time.Unix(0, 0)))
	sub := b.Subscribe(b.NextSeq())

	got := make(chan Event, 1)

	go func() {
		ev, err := sub.Next(context.Background())
		if err == nil {
			got <- ev
		}
	}()

	b.Publish(phase("boot"), "actor-1")

	select {
	case ev := <-got:
		if ev.Payload.(*machine.PhaseEvent).Phase != "boot" || ev.ActorID != "actor-1" {
			t.Fatalf("event = %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscriber not woken")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Next: %v", err)
	}
}
