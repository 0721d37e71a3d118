// Package renewal keeps certificates fresh: the renewal loop of a node's
// certificates (Renewer, at half-life with jitter), the renewal decision and
// checks of a client certificate (ClientRenewal), and the reload of
// certificate files another process renews (WatchFiles). The file formats
// themselves are in certs.
package renewal

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Defaults of the renewal loop.
const (
	// DefaultRenewRetryMin and DefaultRenewRetryMax bound the backoff after
	// a failed renewal. At half-life a node certificate has twelve hours
	// left, so the retries can afford to be gentle on the issuer.
	DefaultRenewRetryMin = 5 * time.Second
	DefaultRenewRetryMax = 5 * time.Minute

	// RenewJitterDivisor spreads renewals over a tenth of the lifetime
	// after half-life, so nodes issued together do not renew together.
	RenewJitterDivisor = 10

	// RenewRetryLeftDivisor caps the wait after a failed renewal at this
	// fraction of the time the certificate has left (RetryMin at least):
	// the backoff may grow to RetryMax, but a short-lived certificate
	// must not sleep past its own expiry while its issuer is back.
	RenewRetryLeftDivisor = 4
)

// RenewAt returns when cert is due for renewal: half its lifetime after
// NotBefore, plus jitter.
func RenewAt(cert *x509.Certificate, jitter time.Duration) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)

	return cert.NotBefore.Add(life/2 + jitter)
}

// shouldRenew is the renewal decision: whether cert is due at now.
func shouldRenew(now time.Time, cert *x509.Certificate, jitter time.Duration) bool {
	return !now.Before(RenewAt(cert, jitter))
}

// Config configures a Renewer. Current and Renew are required.
type Config struct {
	// Current is the certificate in use when the loop starts.
	Current *x509.Certificate
	// Renew obtains a new certificate, puts it in use and returns it. On
	// failure it must leave the old certificate in use: a node keeps
	// serving with what it has until a new one is in hand.
	Renew func(ctx context.Context) (*x509.Certificate, error)
	// RetryMin and RetryMax bound the backoff after a failure; zero means
	// the defaults above.
	RetryMin time.Duration
	RetryMax time.Duration
	// Clock times renewals. Nil means the system clock.
	Clock clock.Clock
	// Rand draws the jitter. Nil means crypto/rand.
	Rand io.Reader
	// Logger receives renewals and failures. Nil discards.
	Logger *slog.Logger
}

// Renewer keeps a certificate fresh: it renews at half-life with jitter and
// retries failures with backoff.
type Renewer struct {
	cfg Config

	mu      sync.Mutex
	current *x509.Certificate
	// renewing serializes calls of Config.Renew: the loop's and RenewNow's.
	renewing sync.Mutex
	// wake tells the loop that RenewNow replaced the certificate, so it
	// times the next renewal from the new one.
	wake chan struct{}
}

// New checks cfg and returns a renewer; Run starts it.
func New(cfg Config) (*Renewer, error) {
	if cfg.Current == nil || cfg.Renew == nil {
		return nil, errors.New("renewal: renewer needs the current certificate and a renew function")
	}

	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRenewRetryMin
	}

	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRenewRetryMax
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Logger = defaults.Logger(cfg.Logger)

	return &Renewer{cfg: cfg, current: cfg.Current, wake: make(chan struct{}, 1)}, nil
}

// Current returns the certificate in use.
func (r *Renewer) Current() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()

	return r.current
}

// Run renews the certificate whenever it is due until ctx ends.
func (r *Renewer) Run(ctx context.Context) error {
	for {
		cur := r.Current()
		jitter := backoff.Jitter(r.cfg.Rand, cur.NotAfter.Sub(cur.NotBefore)/RenewJitterDivisor)

		// Re-check after every wake-up: a timer is only a hint, and the
		// clock may have been set back meanwhile.
		woken := false
		for now := r.cfg.Clock.Now(); !woken && !shouldRenew(now, cur, jitter); now = r.cfg.Clock.Now() {
			var ok bool
			if woken, ok = r.sleep(ctx, RenewAt(cur, jitter).Sub(now)); !ok {
				return nil
			}
		}

		if woken {
			continue
		}

		next, ok := r.renew(ctx, cur)
		if !ok {
			return nil
		}

		r.mu.Lock()
		r.current = next
		r.mu.Unlock()

		r.cfg.Logger.Info("certificate renewed",
			slog.String(logkey.Subject, next.Subject.String()), slog.Time(logkey.NotAfter, next.NotAfter))
	}
}

// sleep waits d, or until RenewNow has replaced the certificate (woken),
// or until ctx ends (not ok).
func (r *Renewer) sleep(ctx context.Context, d time.Duration) (woken, ok bool) {
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return false, false
	case <-r.wake:
		return true, true
	case <-t.C():
		return false, true
	}
}

// RenewNow obtains a new certificate at once, as a CA rotation needs
// (the node's certificates re-issued from the new CA), and returns it; the
// loop then times the next renewal from it. A failure leaves the current
// certificate in use and is returned, not retried.
func (r *Renewer) RenewNow(ctx context.Context) (*x509.Certificate, error) {
	next, err := r.renewOnce(ctx)
	if err != nil {
		return nil, err
	}

	r.mu.Lock()
	r.current = next
	r.mu.Unlock()

	select {
	case r.wake <- struct{}{}:
	default:
	}

	r.cfg.Logger.Info("certificate renewed on request",
		slog.String(logkey.Subject, next.Subject.String()), slog.Time(logkey.NotAfter, next.NotAfter))

	return next, nil
}

func (r *Renewer) renewOnce(ctx context.Context) (*x509.Certificate, error) {
	r.renewing.Lock()
	defer r.renewing.Unlock()

	next, err := r.cfg.Renew(ctx)
	if err == nil && next == nil {
		err = errors.New("renewal: renew returned no certificate")
	}

	return next, err
}

// renew calls Renew until it succeeds or ctx ends, backing off between
// failures. The old certificate stays in use meanwhile.
func (r *Renewer) renew(ctx context.Context, cur *x509.Certificate) (*x509.Certificate, bool) {
	retry := backoff.Backoff{Min: r.cfg.RetryMin, Max: r.cfg.RetryMax, Rand: r.cfg.Rand}

	for {
		next, err := r.renewOnce(ctx)
		if err == nil {
			return next, true
		}

		wait := r.retryWait(&retry, cur)
		r.cfg.Logger.Warn("certificate renewal failed; keeping the current one",
			slog.String(logkey.Error, err.Error()), slog.Time(logkey.NotAfter, cur.NotAfter), slog.Duration(logkey.RetryIn, wait))

		if !clock.Sleep(ctx, r.cfg.Clock, wait) {
			return nil, false
		}
	}
}

// retryWait is the wait before the next attempt: the backoff's next step,
// capped by the time cur has left (see RenewRetryLeftDivisor), with equal
// jitter on the cap so nodes that failed together do not retry together.
func (r *Renewer) retryWait(retry *backoff.Backoff, cur *x509.Certificate) time.Duration {
	wait := retry.Next()

	limit := max(cur.NotAfter.Sub(r.cfg.Clock.Now())/RenewRetryLeftDivisor, r.cfg.RetryMin)
	if wait > limit {
		wait = limit/2 + backoff.Jitter(r.cfg.Rand, limit-limit/2)
	}

	return wait
}
