package trustdclient

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestProbesSpreadAfterTheMoves: the first probe of an endpoint that
// failed comes between ProbeInterval and twice that later, over the whole
// of that range, so nodes that lost a control plane together neither
// return together nor while the others are still moving away from it.
func TestProbesSpreadAfterTheMoves(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	c := &Client{cfg: Config{Clock: clk, Rand: rand.Reader}, failures: make([]int, 1), retryAt: make([]time.Time, 1)}

	lo, hi := time.Duration(1<<62), time.Duration(0)

	for range 1000 {
		c.failures[0] = 0
		c.failed(0)

		d := c.retryAt[0].Sub(clk.Now())
		if d < ProbeInterval || d >= 2*ProbeInterval {
			t.Fatalf("first probe %v after the failure, outside [%v, %v)", d, ProbeInterval, 2*ProbeInterval)
		}

		lo, hi = min(lo, d), max(hi, d)
	}

	if lo > ProbeInterval+time.Second || hi < 2*ProbeInterval-time.Second {
		t.Fatalf("1,000 first probes span only %v to %v", lo, hi)
	}
}
