package renewal

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

func certValid(from time.Time, life time.Duration) *x509.Certificate {
	return &x509.Certificate{NotBefore: from, NotAfter: from.Add(life)}
}

func TestShouldRenew(t *testing.T) {
	cert := certValid(testutil.Epoch, 24*time.Hour)

	tests := []struct {
		name   string
		now    time.Time
		jitter time.Duration
		want   bool
	}{
		{name: "fresh", now: testutil.Epoch, want: false},
		{name: "just before half-life", now: testutil.Epoch.Add(12*time.Hour - time.Nanosecond), want: false},
		{name: "at half-life", now: testutil.Epoch.Add(12 * time.Hour), want: true},
		{name: "jitter delays", now: testutil.Epoch.Add(12 * time.Hour), jitter: time.Hour, want: false},
		{name: "after jitter", now: testutil.Epoch.Add(13 * time.Hour), jitter: time.Hour, want: true},
		{name: "expired", now: testutil.Epoch.Add(48 * time.Hour), want: true},
		{name: "clock before NotBefore", now: testutil.Epoch.Add(-time.Hour), want: false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shouldRenew(tt.now, cert, tt.jitter); got != tt.want {
				t.Fatalf("shouldRenew = %v, want %v", got, tt.want)
			}
		})
	}
}

type renewResult struct {
	cert *x509.Certificate
	err  error
}

// renewHarness runs a Renewer whose Renew hands each call to the test, which
// answers it.
type renewHarness struct {
	t       *testing.T
	clk     *clock.Fake
	r       *Renewer
	calls   chan struct{}
	results chan renewResult
}

func startRenewer(t *testing.T, current *x509.Certificate) *renewHarness {
	t.Helper()

	h := &renewHarness{t: t, clk: clock.NewFake(testutil.Epoch), calls: make(chan struct{}), results: make(chan renewResult)}

	r, err := New(Config{
		Current: current,
		Renew: func(ctx context.Context) (*x509.Certificate, error) {
			select {
			case h.calls <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}

			res := <-h.results

			return res.cert, res.err
		},
		RetryMin: 10 * time.Second,
		RetryMax: 40 * time.Second,
		Clock:    h.clk,
		Rand:     testutil.ZeroRand{},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}

	h.r = r

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		_ = r.Run(ctx)
	}()

	t.Cleanup(func() { cancel(); <-done })

	return h
}

// armed waits for the loop to arm its timer.
func (h *renewHarness) armed() {
	h.t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := h.clk.WaitForTimers(ctx, 1); err != nil {
		h.t.Fatalf("renewer never armed its timer: %v", err)
	}
}

// expectCall waits for a Renew call and answers it.
func (h *renewHarness) expectCall(res renewResult) {
	h.t.Helper()

	select {
	case <-h.calls:
		h.results <- res
	case <-time.After(time.Minute):
		h.t.Fatal("Renew was not called")
	}
}

func (h *renewHarness) noCall() {
	h.t.Helper()

	select {
	case <-h.calls:
		h.t.Fatal("Renew called early")
	default:
	}
}

func TestRenewerRenewsAtHalfLife(t *testing.T) {
	first := certValid(testutil.Epoch, 24*time.Hour)
	h := startRenewer(t, first)

	h.armed()
	h.clk.Advance(12*time.Hour - time.Second)
	h.noCall()

	h.clk.Advance(time.Second)

	second := certValid(h.clk.Now(), 24*time.Hour)
	h.expectCall(renewResult{cert: second})

	// The next renewal is due at the new certificate's half-life.
	h.armed()

	if h.r.Current() != second {
		t.Fatal("renewed certificate not in use")
	}

	h.clk.Advance(12*time.Hour - time.Second)
	h.noCall()
	h.clk.Advance(time.Second)
	h.expectCall(renewResult{cert: certValid(h.clk.Now(), 24*time.Hour)})
}

func TestRenewerRetriesAndKeepsOldCertificate(t *testing.T) {
	first := certValid(testutil.Epoch, 24*time.Hour)
	h := startRenewer(t, first)

	h.armed()
	h.clk.Advance(12 * time.Hour)
	h.expectCall(renewResult{err: errors.New("trustd unreachable")})

	// Backoff without jitter: half of 10s, then half of 20s, then 20s (the
	// 40s cap's half) from then on; the fourth retry succeeds.
	waits := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 20 * time.Second}
	for i, wait := range waits {
		h.armed()

		if h.r.Current() != first {
			t.Fatal("old certificate dropped before a new one was in hand")
		}

		h.clk.Advance(wait - time.Millisecond)
		h.noCall()
		h.clk.Advance(time.Millisecond)

		if i < len(waits)-1 {
			h.expectCall(renewResult{err: errors.New("still unreachable")})
		} else {
			h.expectCall(renewResult{cert: certValid(h.clk.Now(), 24*time.Hour)})
		}
	}

	h.armed()

	if h.r.Current() == first {
		t.Fatal("new certificate not in use after a successful retry")
	}
}

// TestRenewerRetriesFasterNearExpiry: the backoff grows, but a wait never
// exceeds a quarter of the time the certificate has left (RetryMin at
// least), so a short-lived certificate is not slept past.
func TestRenewerRetriesFasterNearExpiry(t *testing.T) {
	first := certValid(testutil.Epoch, 80*time.Second)
	h := startRenewer(t, first)

	h.armed()
	h.clk.Advance(40 * time.Second)
	h.expectCall(renewResult{err: errors.New("control plane down")})

	// Without jitter: 5s (half of 10s), 10s (half of 20s), then the cap of
	// max(left/4, 10s) halved, 5s, from then on, past expiry too.
	waits := []time.Duration{5 * time.Second, 10 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, wait := range waits {
		h.armed()
		h.clk.Advance(wait - time.Millisecond)
		h.noCall()
		h.clk.Advance(time.Millisecond)

		if i < len(waits)-1 {
			h.expectCall(renewResult{err: errors.New("still down")})
		} else {
			h.expectCall(renewResult{cert: certValid(h.clk.Now(), 80*time.Second)})
		}
	}

	h.armed()

	if h.r.Current() == first {
		t.Fatal("new certificate not in use after a successful retry")
	}
}

func TestNewRenewerRefusals(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("NewRenewer accepted an empty config")
	}
}
