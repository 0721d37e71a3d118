package bench

import (
	"fmt"
	"time"
)

// The goals of the connection-flood stage: p99 of joins while one source
// holds its maximum of connections to trustd, and of joins and of an
// admin's Version while many sources flood trustd and apid together; the
// servers' highest VmRSS during that flood.
const (
	GoalFloodedJoinP99    = time.Second
	GoalFloodedVersionP99 = time.Second
	GoalFloodedRSS        = 256 << 20
)

func (r Results) connFloodGoals() []Goal {
	f := r.Flood
	if f == nil {
		f = &ConnFlood{}
	}

	sources := fmt.Sprintf("%d sources flood trustd and apid", f.Sources)
	out := []Goal{
		under("join p99 while one source holds its maximum of connections", f.Flooded.P99, GoalFloodedJoinP99),
		under("join p99 while "+sources, f.Full.P99, GoalFloodedJoinP99),
		under("admin Version through apid, new connection, p99 while "+sources, f.Versions.P99, GoalFloodedVersionP99),
	}

	// A failed call has no latency: the goal is missed, whatever the p99.
	if f.VersionFailures > 0 {
		out[2].Met = false
		out[2].Measured += fmt.Sprintf(" (%d failed)", f.VersionFailures)
	}

	for _, name := range []string{"trustd", "apid"} {
		g := Goal{Name: name + " VmRSS while " + sources, Target: "< " + formatMiB(GoalFloodedRSS), Measured: missing}

		for _, m := range f.Memory {
			if m.Process == name && m.Peak > 0 {
				g.Measured, g.Met, g.Margin = formatMiB(m.Peak), m.Peak < GoalFloodedRSS, float64(GoalFloodedRSS)/float64(m.Peak)
			}
		}

		out = append(out, g)
	}

	return out
}

func (r Results) connFloodSection() Section {
	f := r.Flood
	s := Section{
		Title: "connection flood",
		How: "joins one after the other on a one-node cluster, each a new worker with its own key and connection, " +
			"first with no flood, then while one source holds its maximum of idle TLS connections to trustd " +
			"(HTTP/2 preface sent, no call) and keeps opening silent ones; then flooding sources hold idle TLS, " +
			"silent and half-ClientHello connections to trustd and apid together (one of each kind per source and server, " +
			"made again a second after the server closes it, from a niced process of their own), while workers join and then an admin calls Version through " +
			"apid over a new connection each time: VmRSS before, the highest sampled during, and some time after",
		Rows: []Row{
			{Name: "joins, no flood", Latency: &f.Quiet},
			{
				Name: fmt.Sprintf("joins while one source holds %d connections", f.PerSource), Latency: &f.Flooded,
				Ratios: []Relative{medianOfSummary("no flood", f.Flooded, f.Quiet)},
			},
			{
				Name: fmt.Sprintf("joins while %d sources hold every slot they can", f.Sources), Latency: &f.Full,
				Ratios: []Relative{medianOfSummary("no flood", f.Full, f.Quiet)},
			},
			{
				Name:    fmt.Sprintf("admin Version through apid, new connection, while %d sources hold every slot they can", f.Sources),
				Latency: &f.Versions, Note: fmt.Sprintf("%d failed", f.VersionFailures),
			},
		},
	}

	for _, m := range f.Memory {
		note := fmt.Sprintf("idle %s, during %s (flood held %d)", formatMiB(m.Idle), formatMiB(m.Peak), m.Open)
		for _, a := range m.After {
			note += fmt.Sprintf(", %s after %s", formatDuration(a.Wait), formatMiB(a.RSS))
		}

		s.Rows = append(s.Rows, Row{Name: fmt.Sprintf("%s VmRSS, %d flooding sources", m.Process, f.Sources), Note: note})
	}

	return s
}

func medianOfSummary(to string, a, b Summary) Relative {
	return Relative{To: to, Of: OfMedian, Value: Ratio(float64(a.Median), float64(b.Median))}
}
