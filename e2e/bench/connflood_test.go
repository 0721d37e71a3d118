package bench

import (
	"testing"
	"time"
)

// floodFixture is a connection-flood result with round figures.
func floodFixture() *ConnFlood {
	return &ConnFlood{
		PerSource: 32, Sources: 24,
		Quiet: us(200, 2500, 5000, 2700), Flooded: us(200, 2600, 900_000, 3000), Full: us(200, 3000, 1_900_000, 40_000),
		Memory: []FloodedRSS{
			{Process: "trustd", Idle: 25 << 20, Peak: 45 << 20, Open: 512, After: []RSSAt{{10 * time.Second, 41 << 20}, {150 * time.Second, 28 << 20}}},
			{Process: "apid", Idle: 21 << 20, Peak: 70 << 20, Open: 1024, After: []RSSAt{{10 * time.Second, 70 << 20}, {150 * time.Second, 30 << 20}}},
		},
	}
}

func TestConnFloodGoal(t *testing.T) {
	for _, tc := range []struct {
		name string
		p99  time.Duration
		met  bool
	}{
		{"under a second", 900 * time.Millisecond, true},
		{"a second", time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := floodFixture()
			f.Flooded.P99 = tc.p99

			if g := (Results{Flood: f}).connFloodGoal(); g.Met != tc.met {
				t.Fatalf("p99 %s: met = %v, want %v", tc.p99, g.Met, tc.met)
			}
		})
	}
}

func TestFloodSource(t *testing.T) {
	if got := floodSource(0); got != "127.7.5.2" {
		t.Fatalf("first source %s, want 127.7.5.2", got)
	}

	if got := floodSource(23); got != "127.7.5.25" {
		t.Fatalf("24th source %s, want 127.7.5.25", got)
	}
}
