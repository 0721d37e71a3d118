// Package events is the node-wide event bus: a bounded ring of events that
// publishers append to without ever waiting, and that each subscriber reads
// at its own pace through a cursor. A subscriber that falls further behind
// than the ring holds loses the oldest events and is told how many.
package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// Event is one thing that happened on the node.
type Event struct {
	// Seq numbers events from 1, in publishing order.
	Seq  uint64
	Time time.Time
	// Payload is a Talos API event message, such as machine.ServiceStateEvent.
	Payload proto.Message
	// ActorID ties the event to the request that caused it, if any.
	ActorID string
}

// ErrLagged is returned by Subscription.Next when the subscriber fell behind
// the ring; the error wraps the count of events lost.
var ErrLagged = errors.New("events: subscriber fell behind")

// Clock is the time source of the bus.
type Clock interface{ Now() time.Time }

// Bus is a bounded, non-blocking event ring. It is safe for concurrent use.
type Bus struct {
	mu      sync.Mutex
	clock   Clock
	ring    []Event
	next    uint64        // Seq of the next event
	changed chan struct{} // closed and replaced on every publish
}

// NewBus returns a bus holding the last capacity events.
func NewBus(capacity int, clk Clock) *Bus {
	return &Bus{clock: clk, ring: make([]Event, capacity), next: 1, changed: make(chan struct{})}
}

// Publish appends an event. It never blocks on subscribers.
func (b *Bus) Publish(payload proto.Message, actorID string) Event {
	b.mu.Lock()
	defer b.mu.Unlock()

	ev := Event{Seq: b.next, Time: b.clock.Now(), Payload: payload, ActorID: actorID}
	b.ring[ev.Seq%uint64(len(b.ring))] = ev
	b.next++

	close(b.changed)
	b.changed = make(chan struct{})

	return ev
}

// oldestLocked is the Seq of the oldest event still in the ring.
func (b *Bus) oldestLocked() uint64 {
	if n := uint64(len(b.ring)); b.next > n {
		return b.next - n
	}

	return 1
}

// Tail returns the last n events still held, oldest first; a negative n
// means every event held.
func (b *Bus) Tail(n int) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()

	from := b.oldestLocked()
	if held := b.next - from; n >= 0 && uint64(n) < held {
		from = b.next - uint64(n)
	}

	out := make([]Event, 0, b.next-from)
	for s := from; s < b.next; s++ {
		out = append(out, b.ring[s%uint64(len(b.ring))])
	}

	return out
}

// Subscription reads events from a position in the bus.
type Subscription struct {
	bus  *Bus
	next uint64
}

// Subscribe returns a subscription whose first event is the one with Seq
// from; use NextSeq for only new events, or the Seq of a Tail entry.
func (b *Bus) Subscribe(from uint64) *Subscription {
	return &Subscription{bus: b, next: max(from, 1)}
}

// NextSeq is the Seq the next published event will get.
func (b *Bus) NextSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.next
}

// Next waits for the subscription's next event. If events were dropped
// before it could read them, it returns an error wrapping ErrLagged and moves
// to the oldest event held, so the caller may go on.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.bus.mu.Lock()
		oldest, next, changed := s.bus.oldestLocked(), s.bus.next, s.bus.changed

		if s.next < oldest {
			lost := oldest - s.next
			s.next = oldest
			s.bus.mu.Unlock()

			return Event{}, fmt.Errorf("%w: %d events lost", ErrLagged, lost)
		}

		if s.next < next {
			ev := s.bus.ring[s.next%uint64(len(s.bus.ring))]
			s.next++
			s.bus.mu.Unlock()

			return ev, nil
		}

		s.bus.mu.Unlock()

		select {
		case <-changed:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}
