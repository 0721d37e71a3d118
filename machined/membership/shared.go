package membership

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/aegis-os/aegis/internal/clock"
)

// sharedRead is a read of the whole member list that many calls need and
// that may be maxAge old: the count admit goes by, the hostnames the check
// of a name without its key goes by. One read at a time is made for all
// the calls that need it, each waiting for it as long as its own context
// allows; the read runs on a context of its own (sharedReadTimeout), so a
// caller that gives up does not end it for the others.
//
// Read under a lock with the context of the call that found it due, as it
// was, a read of 10,000 entries on a loaded machine (20 pages, 100–270 ms
// each) outlasted that call's deadline: it failed, no read was kept, and
// the calls queued behind the lock each began another with less time
// left. During a join storm of 10,000 no new node's first heartbeat could
// then be recorded.
type sharedRead[T any] struct {
	maxAge time.Duration
	clock  clock.Clock
	read   func(context.Context) (T, error)

	flight singleflight.Group

	mu   sync.Mutex
	last T
	at   time.Time // when the read of last began; zero before the first
}

// readAt is a read and when it began.
type readAt[T any] struct {
	v  T
	at time.Time
}

// get returns a read at most maxAge old and when it began, waiting for one
// when the last is older, or for ctx.
func (r *sharedRead[T]) get(ctx context.Context) (T, time.Time, error) {
	r.mu.Lock()
	v, at := r.last, r.at
	r.mu.Unlock()

	if !at.IsZero() && r.clock.Now().Sub(at) < r.maxAge {
		return v, at, nil
	}

	ch := r.flight.DoChan("", r.readNow)

	select {
	case res := <-ch:
		if res.Err != nil {
			var zero T

			return zero, time.Time{}, res.Err
		}

		got := res.Val.(readAt[T])

		return got.v, got.at, nil
	case <-ctx.Done():
		var zero T

		return zero, time.Time{}, fmt.Errorf("%w: waiting for a read of every entry: %w", ErrUnavailable, ctx.Err())
	}
}

// readNow makes the read and keeps it; it is the one read under way.
func (r *sharedRead[T]) readNow() (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedReadTimeout)
	defer cancel()

	at := r.clock.Now()

	v, err := r.read(ctx)
	if err != nil {
		return nil, err
	}

	r.mu.Lock()
	r.last, r.at = v, at
	r.mu.Unlock()

	return readAt[T]{v: v, at: at}, nil
}
