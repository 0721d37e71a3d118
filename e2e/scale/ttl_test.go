package scale_test

import (
	"testing"
	"time"

	"github.com/aegis-os/aegis/e2e/scale"
)

// TestDefaultNodeCertTTL: 4 minutes for a small run; for a large one, long
// enough that the first certificates' half-life falls after the storm.
func TestDefaultNodeCertTTL(t *testing.T) {
	for _, tt := range []struct {
		workers int
		want    time.Duration
	}{
		{100, 4 * time.Minute},
		{1000, 4 * time.Minute},
		{5000, 7*time.Minute + 30*time.Second},
		{10000, 15 * time.Minute},
	} {
		if got := scale.DefaultNodeCertTTL(tt.workers); got != tt.want {
			t.Errorf("DefaultNodeCertTTL(%d) = %s, want %s", tt.workers, got, tt.want)
		}
	}
}
