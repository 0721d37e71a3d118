package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Report is what a run prints as a table and writes as JSON: the same
// figures in both.
type Report struct {
	// Mode is "full" or "quick".
	Mode     string    `json:"mode"`
	Revision string    `json:"revision,omitempty"`
	Started  time.Time `json:"started"`
	// Elapsed is the run's wall time, set-up and tear-down included.
	Elapsed  time.Duration `json:"elapsed_ns"`
	Machine  Machine       `json:"machine"`
	Sections []Section     `json:"sections"`
	Memory   []Memory      `json:"memory,omitempty"`
	Goals    []Goal        `json:"goals"`
	// Failures name the parts of the run that failed; their figures are
	// missing from the report.
	Failures []string `json:"failures,omitempty"`
	// Results are the typed figures the sections were made from.
	Results Results `json:"results"`
	// ChartDir is the folder, relative to the Markdown document, that
	// holds the report's charts (GoalsChartFile); empty embeds none.
	ChartDir string `json:"-"`
}

// Section is one table of the report: related rows measured the same way.
type Section struct {
	Title string `json:"title"`
	// How says how the rows were measured.
	How  string `json:"how"`
	Rows []Row  `json:"rows"`
}

// Row is one measured case. Every figure may be absent (zero).
type Row struct {
	Name    string   `json:"name"`
	Latency *Summary `json:"latency,omitempty"`
	// Rate is events per second.
	Rate float64 `json:"rate_per_s,omitempty"`
	// CPU is the CPU time one call cost, over every process involved;
	// ServerCPU the part of it the server under test spent.
	CPU       time.Duration `json:"cpu_per_call_ns,omitempty"`
	ServerCPU time.Duration `json:"server_cpu_per_call_ns,omitempty"`
	// Total is a whole run's duration where that is the figure.
	Total  time.Duration `json:"total_ns,omitempty"`
	Ratios []Relative    `json:"ratios,omitempty"`
	// Note adds what the figures need to be read right.
	Note string `json:"note,omitempty"`
}

// Relative is a row's figure divided by the same figure of another case,
// named by To ("in-process bound", "direct").
type Relative struct {
	To string `json:"to"`
	// Of is the figure divided: OfRate (higher is better), OfMedian
	// (median latency: lower is better) or OfServerCPU.
	Of    string  `json:"of"`
	Value float64 `json:"value"`
}

// The figures a Relative divides.
const (
	OfRate   = "rate"
	OfMedian = "median"
	// OfServerCPU divides a server's CPU time per call (lower is better).
	OfServerCPU = "CPU"
)

// Goal is a target the figures are measured against.
type Goal struct {
	Name string `json:"name"`
	// Target is the bound, as text ("≥ 0.50×", "< 5s").
	Target string `json:"target"`
	// Measured is the figure compared, as text.
	Measured string `json:"measured"`
	// Met is false also when the figure is missing (Measured is "-").
	Met bool `json:"met"`
	// Margin is the figure relative to its goal, turned so that above 1 is
	// better: measured ÷ bound for an "at least" goal, bound ÷ measured for
	// "at most" and "under"; zero when the figure is missing. The goals
	// chart draws it.
	Margin float64 `json:"margin,omitempty"`
}

// Machine describes where a run ran.
type Machine struct {
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	MemoryMiB uint64 `json:"memory_mib"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	// LoadBefore and LoadAfter are the 1-minute load averages when the run
	// started and ended: other work on the machine shows there.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

// NewReport builds the report of results: its sections, memory and goals.
func NewReport(mode string, started time.Time, m Machine, res Results) *Report {
	return &Report{
		Mode: mode, Started: started.UTC(), Machine: m,
		Sections: res.Sections(), Memory: res.Memory, Goals: res.Goals(), Results: res,
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")

	return enc.Encode(r)
}

// GoalSummary is one line of the goals met and missed, for the end of a
// run: "goals: 9 of 18 met, 8 missed, 1 not measured".
func (r *Report) GoalSummary() string {
	var met, missed, notMeasured int

	for _, g := range r.Goals {
		switch {
		case g.Met:
			met++
		case g.Measured == missing:
			notMeasured++
		default:
			missed++
		}
	}

	s := fmt.Sprintf("goals: %d of %d met, %d missed", met, len(r.Goals), missed)
	if notMeasured > 0 {
		s += fmt.Sprintf(", %d not measured", notMeasured)
	}

	return s
}
