package bench

import (
	"net/netip"
	"testing"
	"time"
)

// floodFixture is a connection-flood result with round figures.
func floodFixture() *ConnFlood {
	return &ConnFlood{
		PerSource: 32, Sources: 2000,
		Quiet: us(200, 2500, 5000, 2700), Flooded: us(200, 2600, 900_000, 3000), Full: us(200, 3000, 1_900_000, 40_000),
		Versions: us(198, 3000, 600_000, 20_000), VersionFailures: 2,
		Memory: []FloodedRSS{
			{Process: "trustd", Idle: 25 << 20, Peak: 45 << 20, Open: 512, After: []RSSAt{{10 * time.Second, 41 << 20}, {150 * time.Second, 28 << 20}}},
			{Process: "apid", Idle: 21 << 20, Peak: 70 << 20, Open: 1024, After: []RSSAt{{10 * time.Second, 70 << 20}, {150 * time.Second, 30 << 20}}},
		},
	}
}

func TestConnFloodGoals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ConnFlood)
		want []bool // one source, many sources, Version, trustd RSS, apid RSS
	}{
		{"fixture", func(*ConnFlood) {}, []bool{true, false, false, true, true}},
		{"a second", func(f *ConnFlood) { f.Flooded.P99 = time.Second }, []bool{false, false, false, true, true}},
		{"no failed call", func(f *ConnFlood) { f.VersionFailures = 0 }, []bool{true, false, true, true, true}},
		{"apid over 256 MiB", func(f *ConnFlood) { f.Memory[1].Peak = 300 << 20 }, []bool{true, false, false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := floodFixture()
			tc.edit(f)

			goals := (Results{Flood: f}).connFloodGoals()
			if len(goals) != len(tc.want) {
				t.Fatalf("%d goals, want %d", len(goals), len(tc.want))
			}

			for i, g := range goals {
				if g.Met != tc.want[i] {
					t.Errorf("%s (%s): met = %v, want %v", g.Name, g.Measured, g.Met, tc.want[i])
				}
			}
		})
	}
}

func TestFloodSource(t *testing.T) {
	for i, want := range map[int]string{0: "127.7.24.1", 249: "127.7.24.250", 250: "127.7.25.1", 1999: "127.7.31.250"} {
		got := floodSource(i)
		if got != want {
			t.Errorf("source %d: %s, want %s", i, got, want)
		}

		if a := netip.MustParseAddr(got); !ConnFloodSources.Contains(a) {
			t.Errorf("source %d: %s is outside %s", i, got, ConnFloodSources)
		}
	}
}
