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
	// StartPeriod is the time between checks until the first healthy
	// result, for at most StartWindow after the first check: a service
	// that comes up is seen up at once rather than a Period later (etcd's
	// start to healthy was mostly its check's period), and one that does
	// not is soon asked only every Period. Zero: DefaultStartPeriod, or
	// Period when that is shorter.
	StartPeriod time.Duration
	// StartWindow bounds the checks at StartPeriod. Zero:
	// DefaultStartWindow.
	StartWindow time.Duration
}

// Defaults: the first check soon after start, then every 5 s, each allowed
// 2 s; a check slower than that counts as a failure.
const (
	DefaultInitialDelay = 100 * time.Millisecond
	DefaultPeriod       = 5 * time.Second
	DefaultTimeout      = 2 * time.Second
	DefaultStartPeriod  = 100 * time.Millisecond
	DefaultStartWindow  = 30 * time.Second
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

	if s.StartPeriod == 0 {
		s.StartPeriod = min(DefaultStartPeriod, s.Period)
	}

	if s.StartWindow == 0 {
		s.StartWindow = DefaultStartWindow
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

	var (
		first      time.Time
		wasHealthy bool
	)

	for {
		if !clock.Sleep(ctx, clk, wait) {
			return
		}

		if first.IsZero() {
			first = clk.Now()
		}

		err := runOnce(ctx, settings.Timeout, check)
		wasHealthy = wasHealthy || err == nil

		wait = settings.Period
		if !wasHealthy && clk.Now().Sub(first) < settings.StartWindow {
			wait = settings.StartPeriod
		}

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
