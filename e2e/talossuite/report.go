package talossuite

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is a whole run: Talos's tests, the drift of the expectation file
// and the talosctl verbs.
type Report struct {
	TalosVersion string       `json:"talosVersion"`
	Tests        []TestResult `json:"tests"`
	Drift        []string     `json:"drift,omitempty"`
	Verbs        []VerbResult `json:"verbs,omitempty"`
	// BuildSeconds and RunSeconds are the times of the build (zero when
	// cached) and of the run against the cluster.
	BuildSeconds float64 `json:"buildSeconds"`
	RunSeconds   float64 `json:"runSeconds"`
}

// SuiteRow counts one suite's tests.
type SuiteRow struct {
	Suite                           string
	Passed, Failed, Skipped, Listed int
	// Failures are the failed tests, with their first error line.
	Failures []TestResult
}

// Rows groups the tests by suite, in the order the suites first appear.
func (r Report) Rows() []SuiteRow {
	var rows []SuiteRow

	index := map[string]int{}

	for _, t := range r.Tests {
		i, ok := index[t.Suite()]
		if !ok {
			i = len(rows)
			index[t.Suite()] = i
			rows = append(rows, SuiteRow{Suite: t.Suite()})
		}

		row := &rows[i]

		switch t.Outcome {
		case Passed:
			row.Passed++
		case Failed:
			row.Failed++
			row.Failures = append(row.Failures, t)
		case Skipped:
			row.Skipped++
		case Listed:
			row.Listed++
		}
	}

	return rows
}

// Problems returns what makes the run fail: a served test that failed, a
// line of drift, a talosctl verb that failed.
func (r Report) Problems() []string {
	var out []string

	for _, t := range r.Tests {
		if t.Outcome == Failed {
			out = append(out, "test "+t.Test+": "+t.Detail)
		}
	}

	for _, d := range r.Drift {
		out = append(out, "expectation file: "+d)
	}

	for _, v := range r.Verbs {
		if v.Status == VerbFailed {
			out = append(out, "talosctl "+v.Command+": "+v.Detail)
		}
	}

	return out
}

// Print writes the per-suite table, each failure's first error line, the
// drift, the talosctl table and a summary line.
func (r Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tPASSED\tFAILED\tSKIPPED\tNOT RUN (skip list)")

	var total SuiteRow

	for _, row := range r.Rows() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", row.Suite, row.Passed, row.Failed, row.Skipped, row.Listed)
		total.Passed += row.Passed
		total.Failed += row.Failed
		total.Skipped += row.Skipped
		total.Listed += row.Listed
	}

	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\n", total.Passed, total.Failed, total.Skipped, total.Listed)
	tw.Flush() //nolint:errcheck // a terminal

	for _, row := range r.Rows() {
		for _, f := range row.Failures {
			fmt.Fprintf(w, "FAIL %s: %s\n", f.Test, f.Detail)
		}
	}

	for _, d := range r.Drift {
		fmt.Fprintf(w, "DRIFT %s\n", d)
	}

	if len(r.Verbs) > 0 {
		fmt.Fprintln(w)
		printVerbs(w, r.Verbs)
	}

	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped by Talos, %d on the skip list; %d drift; %d talosctl verbs failed\n",
		total.Passed, total.Failed, total.Skipped, total.Listed, len(r.Drift), countVerbs(r.Verbs, VerbFailed))
}

// Markdown writes the report as Markdown tables.
func (r Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# Talos %s API suites against Aegis\n\n", r.TalosVersion)
	fmt.Fprintf(w, "Build %.0fs (0: cached), run %.0fs.\n\n", r.BuildSeconds, r.RunSeconds)
	fmt.Fprintln(w, "| suite | passed | failed | skipped | not run (skip list) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")

	for _, row := range r.Rows() {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", row.Suite, row.Passed, row.Failed, row.Skipped, row.Listed)
	}

	fmt.Fprintln(w, "\n| test | outcome | first error line / reason |")
	fmt.Fprintln(w, "| --- | --- | --- |")

	for _, t := range r.Tests {
		if t.Outcome != Listed {
			fmt.Fprintf(w, "| %s | %s | %s |\n", t.Test, t.Outcome, mdCell(t.Detail))
		}
	}

	for _, d := range r.Drift {
		fmt.Fprintf(w, "\nDrift: %s\n", mdCell(d))
	}

	if len(r.Verbs) > 0 {
		fmt.Fprintln(w, "\n| talosctl | status | command | first error line / reason |")
		fmt.Fprintln(w, "| --- | --- | --- | --- |")

		for _, v := range r.Verbs {
			fmt.Fprintf(w, "| `%s` | %s | `%s` | %s |\n", v.Command, v.Status, strings.Join(v.Args, " "), mdCell(v.Detail))
		}
	}
}

// JSON writes the report as indented JSON.
func (r Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")

	return enc.Encode(r)
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
