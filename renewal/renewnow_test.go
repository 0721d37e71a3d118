package renewal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
)

// TestRenewNow: a renewal on request puts the new certificate in use at
// once, and the loop times the next renewal from it; a failed one keeps
// the current certificate and is not retried.
func TestRenewNow(t *testing.T) {
	first := certValid(testutil.Epoch, 24*time.Hour)
	h := startRenewer(t, first)

	h.armed()
	h.clk.Advance(6 * time.Hour)

	type answer struct {
		cert any
		err  error
	}

	now := make(chan answer, 1)
	ask := func() {
		go func() {
			c, err := h.r.RenewNow(context.Background())
			now <- answer{c, err}
		}()
	}

	ask()
	h.expectCall(renewResult{err: errors.New("trustd unreachable")})

	if a := <-now; a.err == nil || h.r.Current() != first {
		t.Fatalf("failed renewal on request: %v, current changed: %v", a.err, h.r.Current() != first)
	}

	h.noCall()

	ask()

	second := certValid(h.clk.Now(), 24*time.Hour)
	h.expectCall(renewResult{cert: second})

	if a := <-now; a.err != nil || h.r.Current() != second {
		t.Fatalf("renewal on request: %v", a.err)
	}

	// The first certificate's half-life passes without a renewal: the loop
	// now follows the second one's.
	h.armed()
	h.clk.Advance(6*time.Hour + time.Second)
	h.noCall()
	h.clk.Advance(6 * time.Hour)
	h.expectCall(renewResult{cert: certValid(h.clk.Now(), 24*time.Hour)})
}
