// Package defaults gives the Clock, Rand and Logger a component's Config
// leaves nil their defaults, in one place (as crypto/tls's Config.time and
// Config.rand do): the system clock, crypto/rand, and a logger that
// discards. A constructor writes cfg.Clock = defaults.Clock(cfg.Clock)
// instead of its own nil check.
package defaults

import (
	"crypto/rand"
	"io"
	"log/slog"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// Clock is c, or the system clock when c is nil.
func Clock(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.Real()
	}

	return c
}

// Now is c, or the system clock when c is nil, for a Config whose clock
// only reads the time.
func Now(c interface{ Now() time.Time }) interface{ Now() time.Time } {
	if c == nil {
		return clock.Real()
	}

	return c
}

// Rand is r, or crypto/rand's Reader when r is nil.
func Rand(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}

	return r
}

// Logger is l, or a logger that discards when l is nil: a component logs
// only where its caller asked it to.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}

	return l
}

// Output is w, or io.Discard when w is nil: the output of a process or
// container nobody asked to keep.
func Output(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}

	return w
}
