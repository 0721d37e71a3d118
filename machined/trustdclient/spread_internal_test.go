package trustdclient

import (
	"crypto/rand"
	"testing"
	"time"
)

// TestJitterSpreadsProbes: probe delays lie in [d/2, 3d/2) and cover the
// range, so nodes that lost a control plane together do not return
// together.
func TestJitterSpreadsProbes(t *testing.T) {
	const d = 10 * time.Second

	lo, hi := time.Duration(1<<62), time.Duration(0)

	for range 1000 {
		j := jittered(d, rand.Reader)
		if j < d/2 || j >= 3*d/2 {
			t.Fatalf("jittered(%v) = %v, outside [%v, %v)", d, j, d/2, 3*d/2)
		}

		lo, hi = min(lo, j), max(hi, j)
	}

	if lo > 6*time.Second || hi < 14*time.Second {
		t.Fatalf("1,000 probe delays span only %v to %v", lo, hi)
	}
}
