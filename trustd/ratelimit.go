package trustd

import (
	"container/list"
	"net/netip"
	"sync"

	"golang.org/x/time/rate"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/source"
)

// failureLimiter counts failed requests per source in token buckets: each
// failure takes a token, tokens come back at the refill rate, and a source
// with no token left is refused before any work is done for it. Successes
// cost nothing, so an honest node is never slowed.
//
// Only sources that failed are tracked, and a source that is not tracked is
// never refused: when the table is full, the source whose last failure (or
// refused attempt) is the oldest is forgotten to make room. Its bucket has
// refilled the longest, so it is the one closest to being forgiven anyway. A flood of failing
// sources can thus only push other failing sources out, never lock out a
// node that has not failed.
type failureLimiter struct {
	clock clock.Clock
	limit rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	sources map[netip.Prefix]*list.Element // of *failures
	recent  list.List                      // most recent failure or refusal at the front
}

// failures is one tracked source.
type failures struct {
	key    netip.Prefix
	bucket *rate.Limiter
}

func newFailureLimiter(cfg RateLimit, clk clock.Clock) *failureLimiter {
	return &failureLimiter{
		clock:   clk,
		limit:   rate.Every(cfg.Refill),
		burst:   cfg.Burst,
		max:     cfg.MaxSources,
		sources: map[netip.Prefix]*list.Element{},
	}
}

// allowed reports whether src has failures left. A source that is not
// tracked is allowed and stays untracked, so a source that never fails
// never takes a slot. A refused attempt counts as recent: a source that
// keeps knocking while locked out stays tracked, and locked out, rather
// than being forgotten for quieter ones.
func (l *failureLimiter) allowed(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	e, ok := l.sources[source.Block(src)]
	if !ok {
		return true
	}

	if e.Value.(*failures).bucket.TokensAt(l.clock.Now()) >= 1 {
		return true
	}

	l.recent.MoveToFront(e)

	return false
}

// fail counts one failure of src and makes it the most recent.
func (l *failureLimiter) fail(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()

	now := l.clock.Now()
	key := source.Block(src)

	e, ok := l.sources[key]
	if ok {
		l.recent.MoveToFront(e)
	} else {
		e = l.track(key)
	}

	e.Value.(*failures).bucket.AllowN(now, 1)
}

// track adds a source, first forgetting the least recent ones while the
// table is full.
func (l *failureLimiter) track(key netip.Prefix) *list.Element {
	for l.recent.Len() >= l.max {
		oldest := l.recent.Back()
		l.recent.Remove(oldest)
		delete(l.sources, oldest.Value.(*failures).key)
	}

	e := l.recent.PushFront(&failures{key: key, bucket: rate.NewLimiter(l.limit, l.burst)})
	l.sources[key] = e

	return e
}

// tracked returns how many sources the limiter holds.
func (l *failureLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.recent.Len()
}
