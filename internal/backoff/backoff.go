// Package backoff computes retry delays: exponential growth between a floor
// and a cap, with jitter drawn from an injected source so that many nodes
// failing together do not retry together, and tests get fixed delays.
// trustd's join client, the certificate renewal loop, the time service and
// machined's restart policy share it.
//
// github.com/cenkalti/backoff (v4 and v5, both in the module graph) is not
// used, for three reasons found in its source:
//   - its jitter draws from the global math/rand (math/rand/v2 in v5), which
//     no caller can replace, so a test cannot get fixed delays; Aegis injects
//     Rand into everything random (STYLE.md, convention 2);
//   - its jitter is ±RandomizationFactor around the step and is applied after
//     the cap, so a delay can exceed MaxInterval; here a delay is never above
//     Max, so a configured RetryMax or MaxBackoff is a true maximum;
//   - its Retry and Ticker wait on real timers (time.NewTimer), while Aegis's
//     retry loops wait on an injected clock.Clock that tests advance.
//
// With its jitter and timers set aside, what the library would add is the
// doubling up to a cap: the three lines of Next.
package backoff

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/aegis-os/aegis/internal/defaults"
)

// Backoff hands out growing delays. Its zero value is not usable; set Min
// and Max. It is not safe for concurrent use: each retry loop owns one.
type Backoff struct {
	// Min is the first delay before jitter. Required, > 0.
	Min time.Duration
	// Max caps the delay before jitter. Values below Min mean Min.
	Max time.Duration
	// Rand is the jitter source. Nil means crypto/rand.
	Rand io.Reader

	cur time.Duration
}

// Next returns the next delay: the current step, doubled after each call up
// to Max, of which the upper half is randomized ("equal jitter"), so a delay
// is never below half its step and never above it.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.Min
	case b.cur < b.Max:
		b.cur = min(2*b.cur, max(b.Max, b.Min))
	}

	half := b.cur / 2

	return half + Jitter(b.Rand, b.cur-half)
}

// Reset makes the next delay start from Min again, after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Jitter returns a duration uniform in [0, span) drawn from r (crypto/rand if
// nil). A failing source gives zero jitter rather than an error: jitter only
// spreads load, it protects nothing.
func Jitter(r io.Reader, span time.Duration) time.Duration {
	if span <= 0 {
		return 0
	}

	r = defaults.Rand(r)

	var buf [8]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return 0
	}

	// The modulo bias is at most span/2^64, far below a nanosecond.
	return time.Duration(binary.BigEndian.Uint64(buf[:]) % uint64(span))
}
