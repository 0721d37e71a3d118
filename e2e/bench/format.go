package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// formatDuration prints a duration with a precision that suits its size;
// zero (not measured) is "-".
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return missing
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// formatCPU prints a CPU time per call; nothing where not measured.
func formatCPU(d time.Duration) string {
	if d <= 0 {
		return ""
	}

	return formatDuration(d)
}

// formatRate prints events per second.
func formatRate(r float64) string {
	switch {
	case r <= 0:
		return ""
	case r < 100:
		return fmt.Sprintf("%.1f/s", r)
	default:
		return fmt.Sprintf("%.0f/s", r)
	}
}

// formatMiB prints a byte count in MiB.
func formatMiB(b uint64) string {
	if b == 0 {
		return missing
	}

	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// formatRelatives prints a row's ratios: "0.31× bound rate, 1.9× cfssl rate".
func formatRelatives(rs []Relative) string {
	parts := make([]string, 0, len(rs))

	for _, r := range rs {
		v := missing
		if r.Value > 0 {
			v = strconv.FormatFloat(r.Value, 'f', 2, 64) + "×"
		}

		parts = append(parts, fmt.Sprintf("%s %s %s", v, r.To, r.Of))
	}

	return strings.Join(parts, ", ")
}

// grid is a table: a header row, then the rows, all of the same width.
type grid [][]string

func (s Section) grid() grid {
	g := grid{{"case", "n", "median", "p99", "total", "rate", "CPU/call", "server CPU/call", "relative", "note"}}

	for _, r := range s.Rows {
		n, median, p99 := "", "", ""
		if r.Latency != nil {
			n, median, p99 = strconv.Itoa(r.Latency.N), formatDuration(r.Latency.Median), formatDuration(r.Latency.P99)
		}

		total := ""
		if r.Total > 0 {
			total = formatDuration(r.Total)
		}

		g = append(g, []string{
			r.Name, n, median, p99, total, formatRate(r.Rate),
			formatCPU(r.CPU), formatCPU(r.ServerCPU), formatRelatives(r.Ratios), r.Note,
		})
	}

	return g
}

func memoryGrid(ms []Memory) grid {
	g := grid{{"process", "instance", "idle RSS", "idle peak (VmHWM)", "peak after loads (VmHWM)"}}

	for _, m := range ms {
		g = append(g, []string{m.Process, m.Role, formatMiB(m.IdleRSS), formatMiB(m.IdleHWM), formatMiB(m.LoadHWM)})
	}

	return g
}

func goalsGrid(gs []Goal) grid {
	g := grid{{"goal", "target", "measured", "met"}}

	for _, goal := range gs {
		met := "no"
		if goal.Met {
			met = "yes"
		}

		g = append(g, []string{goal.Name, goal.Target, goal.Measured, met})
	}

	return g
}
