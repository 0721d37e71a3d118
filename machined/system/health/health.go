// Package health runs a service's health check periodically, each attempt
// under its own timeout, and reports changes of the result.
package health

import (
	"context"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// Check returns nil when the service is healthy and the reason otherwise.
type Check func(ctx context.Context) error

// Settings time the checks. Zero values take the defaults.
type Settings struct {
	// InitialDelay before the first check.
	InitialDelay time.Duration
	// Period between checks.
	Period time.Duration
	// Timeout of one check.
	Timeout time.Duration
}

// Defaults: the first check soon after start, then every 5 s, each allowed
// 2 s; a check slower than that counts as a failure.
const (
	DefaultInitialDelay = 100 * time.Millisecond
	DefaultPeriod       = 5 * time.Second
	DefaultTimeout      = 2 * time.Second
)

func (s Settings) withDefaults() Settings {
	if s.InitialDelay == 0 {
		s.InitialDelay = DefaultInitialDelay
	}

	if s.Period == 0 {
		s.Period = DefaultPeriod
	}

	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}

	return s
}

// Status is the latest result of a service's health checks.
type Status struct {
	// Unknown is true until the first check has finished.
	Unknown bool
	Healthy bool
	// LastMessage is the error of the last failed check, empty when healthy.
	LastMessage string
	// LastChange is when Healthy or LastMessage last changed.
	LastChange time.Time
}

// Run checks every period until ctx ends, calling onChange whenever the
// result or its message changes (the first result is always a change).
func Run(ctx context.Context, clk clock.Clock, settings Settings, check Check, onChange func(Status)) {
	settings = settings.withDefaults()
	cur := Status{Unknown: true}
	wait := settings.InitialDelay

	for {
		if !clock.Sleep(ctx, clk, wait) {
			return
		}

		wait = settings.Period
		err := runOnce(ctx, settings.Timeout, check)

		if ctx.Err() != nil {
			return
		}

		next := Status{Healthy: err == nil, LastChange: cur.LastChange}
		if err != nil {
			next.LastMessage = err.Error()
		}

		if cur.Unknown || next.Healthy != cur.Healthy || next.LastMessage != cur.LastMessage {
			next.LastChange = clk.Now()
			cur = next
			onChange(cur)
		}
	}
}

func runOnce(ctx context.Context, timeout time.Duration, check Check) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	return check(ctx)
}
