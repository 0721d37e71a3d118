package trustd

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/aegis-os/aegis/internal/clock"
)

// failureLimiter counts failed requests per source in token buckets: each
// failure takes a token, tokens come back at the refill rate, and a source
// with no token left is refused before any work is done for it. Successes
// cost nothing, so an honest node is never slowed.
type failureLimiter struct {
	clock  clock.Clock
	limit  rate.Limit
	burst  int
	max    int
	refill time.Duration

	mu        sync.Mutex
	sources   map[netip.Addr]*rate.Limiter
	overflow  *rate.Limiter
	lastSweep time.Time
}

func newFailureLimiter(cfg RateLimit, clk clock.Clock) *failureLimiter {
	limit := rate.Every(cfg.Refill)

	return &failureLimiter{
		clock:    clk,
		limit:    limit,
		burst:    cfg.Burst,
		max:      cfg.MaxSources,
		refill:   cfg.Refill,
		sources:  map[netip.Addr]*rate.Limiter{},
		overflow: rate.NewLimiter(limit, cfg.Burst),
	}
}

// allowed reports whether src has failures left. It records nothing, so a
// source that never fails never takes a slot.
func (l *failureLimiter) allowed(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	lim, ok := l.sources[limitKey(src)]
	if !ok {
		if len(l.sources) < l.max {
			return true
		}

		lim = l.overflow
	}

	return lim.TokensAt(l.clock.Now()) >= 1
}

// fail counts one failure of src.
func (l *failureLimiter) fail(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()

	now := l.clock.Now()
	key := limitKey(src)

	lim, ok := l.sources[key]
	if !ok {
		lim = l.slot(key, now)
	}

	lim.AllowN(now, 1)
}

// slot returns a new bucket for key, or the shared overflow bucket when the
// table is full even after dropping sources whose buckets have refilled
// (those are indistinguishable from new ones). The sweep runs at most once
// per refill interval, so a flood of new sources cannot make every failure
// walk the table.
func (l *failureLimiter) slot(key netip.Addr, now time.Time) *rate.Limiter {
	if len(l.sources) >= l.max && now.Sub(l.lastSweep) >= l.refill {
		l.lastSweep = now

		for k, lim := range l.sources {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.sources, k)
			}
		}
	}

	if len(l.sources) >= l.max {
		return l.overflow
	}

	lim := rate.NewLimiter(l.limit, l.burst)
	l.sources[key] = lim

	return lim
}

// limitKey groups IPv6 sources by /64, the block a single host usually
// controls; IPv4 sources count alone.
func limitKey(addr netip.Addr) netip.Addr {
	if addr.Is6() {
		p, _ := addr.Prefix(64)

		return p.Addr()
	}

	return addr
}
