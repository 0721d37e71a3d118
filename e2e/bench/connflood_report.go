package bench

import (
	"fmt"
	"time"
)

// GoalFloodedJoinP99 is the goal for joins while one source holds its
// maximum of connections to trustd: p99 under it.
const GoalFloodedJoinP99 = time.Second

func (r Results) connFloodGoal() Goal {
	name := "join p99 while one source holds its maximum of connections"
	if r.Flood == nil {
		return under(name, 0, GoalFloodedJoinP99)
	}

	return under(name, r.Flood.Flooded.P99, GoalFloodedJoinP99)
}

func (r Results) connFloodSection() Section {
	f := r.Flood
	s := Section{
		Title: "connection flood",
		How: "joins one after the other on a one-node cluster, each a new worker with its own key and connection, " +
			"first with no flood, then while one source holds its maximum of idle TLS connections to trustd " +
			"(HTTP/2 preface sent, no call) and keeps opening silent ones; then flooding sources hold idle TLS, " +
			"silent and half-ClientHello connections to trustd and apid together: VmRSS before, the highest sampled " +
			"during, and some time after",
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
