package bench

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report as plain-text tables.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)

	fmt.Fprintf(bw, "Aegis benchmarks (%s run", r.Mode)
	if r.Revision != "" {
		fmt.Fprintf(bw, " of %s", r.Revision)
	}

	fmt.Fprintf(bw, ", %s, %s)\n", r.Started.Format(time.RFC3339), formatDuration(r.Elapsed))
	fmt.Fprintf(bw, "%s\n", r.Machine.Summary())

	for _, s := range r.Sections {
		fmt.Fprintf(bw, "\n== %s\n   %s\n", s.Title, s.How)
		writeText(bw, s.grid())
	}

	if len(r.Memory) > 0 {
		fmt.Fprintf(bw, "\n== memory\n   %s\n", memoryHow)
		writeText(bw, memoryGrid(r.Memory))
	}

	fmt.Fprintf(bw, "\n== goals\n")
	writeText(bw, goalsGrid(r.Goals))

	for _, f := range r.Failures {
		fmt.Fprintf(bw, "\nFAILED: %s\n", f)
	}

	return bw.Flush()
}

// memoryHow says how the memory table was read.
const memoryHow = "VmRSS and VmHWM of the real processes from /proc/PID/status: idle once the cluster is up, " +
	"peak after every load of the run"

// writeText prints g aligned, with the columns that are empty in every row
// left out.
func writeText(w io.Writer, g grid) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)

	for _, row := range g.compact() {
		fmt.Fprintf(tw, "   %s\n", strings.Join(row, "\t"))
	}

	_ = tw.Flush() // the writer under it is a bufio.Writer, flushed by the caller
}

// compact drops the columns that are empty in every row but the header.
func (g grid) compact() grid {
	if len(g) == 0 {
		return g
	}

	var keep []int

	for c := range g[0] {
		for _, row := range g[1:] {
			if row[c] != "" {
				keep = append(keep, c)

				break
			}
		}
	}

	out := make(grid, len(g))
	for i, row := range g {
		for _, c := range keep {
			out[i] = append(out[i], row[c])
		}
	}

	return out
}

// Summary is the machine on one line.
func (m Machine) Summary() string {
	return fmt.Sprintf("%s, %d CPUs, %d MiB, %s, Linux %s, %s; load average %s before, %s after",
		m.CPU, m.CPUs, m.MemoryMiB, m.OS, m.Kernel, m.Go, m.LoadBefore, m.LoadAfter)
}
