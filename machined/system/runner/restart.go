package runner

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Policy says when a finished run is started again.
type Policy int

// Restart policies.
const (
	// Once never restarts.
	Once Policy = iota
	// UntilSuccess restarts after a failure, not after a clean exit.
	UntilSuccess
	// Forever restarts after any exit, until the service is stopped.
	Forever
)

func (p Policy) String() string {
	switch p {
	case Once:
		return "once"
	case UntilSuccess:
		return "until-success"
	default:
		return "forever"
	}
}

// Restarting is in the state message of every exit the Restart runner
// restarts after: "REASON; restarting in DELAY". Readers of the service
// events (a version on trial) count exits by it; localcluster reads the same
// text from machined's log.
const Restarting = "; restarting in "

// Backoff defaults: a crash loop settles at one attempt every 30 s; a run of
// a minute counts as healthy and earns a fast restart next time.
const (
	DefaultMinBackoff  = time.Second
	DefaultMaxBackoff  = 30 * time.Second
	DefaultStableAfter = time.Minute
)

// RestartConfig configures Restart. Zero durations take the defaults.
type RestartConfig struct {
	Policy Policy
	// MinBackoff is the first step of the delay; the step doubles after each
	// quick exit up to MaxBackoff, and each delay is drawn from the upper
	// half of its step (internal/backoff), so that services that crash
	// together do not restart together.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// StableAfter is how long a run must last to reset the delay to MinBackoff.
	StableAfter time.Duration
	// Clock times the delays. Nil means the system clock.
	Clock clock.Clock
	// Rand is the jitter source. Nil means crypto/rand.
	Rand io.Reader
}

type restart struct {
	inner Runner
	cfg   RestartConfig
}

// Restart wraps inner with a restart policy and exponential backoff.
func Restart(inner Runner, cfg RestartConfig) Runner {
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}

	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}

	if cfg.StableAfter == 0 {
		cfg.StableAfter = DefaultStableAfter
	}

	cfg.Clock = defaults.Clock(cfg.Clock)

	return &restart{inner: inner, cfg: cfg}
}

func (r *restart) String() string { return fmt.Sprintf("%s (restart %s)", r.inner, r.cfg.Policy) }

func (r *restart) Run(ctx context.Context, notify Notify) error {
	delays := backoff.Backoff{Min: r.cfg.MinBackoff, Max: r.cfg.MaxBackoff, Rand: r.cfg.Rand}

	for {
		started := r.cfg.Clock.Now()
		err := r.inner.Run(ctx, notify)

		if ctx.Err() != nil {
			return nil
		}

		if r.cfg.Policy == Once || (r.cfg.Policy == UntilSuccess && err == nil) {
			return err
		}

		if r.cfg.Clock.Now().Sub(started) >= r.cfg.StableAfter {
			delays.Reset()
		}

		delay := delays.Next()

		reason := "exited"
		if err != nil {
			reason = err.Error()
		}

		notify(false, reason+Restarting+delay.String())

		if !clock.Sleep(ctx, r.cfg.Clock, delay) {
			return nil
		}
	}
}
