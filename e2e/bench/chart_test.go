package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// goldenReport is the report of testdata/report.json, the golden results
// file of TestReportOutputs, read back as a results file is.
func goldenReport(t *testing.T) *Report {
	t.Helper()

	data, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}

	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}

	return &r
}

// TestGoalsChart draws the goals chart of the golden results file, without
// running anything, and compares it with its golden SVG.
func TestGoalsChart(t *testing.T) {
	var b bytes.Buffer
	if err := WriteGoalsChart(&b, goldenReport(t)); err != nil {
		t.Fatal(err)
	}

	svg := b.String()
	if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, "</svg>") {
		t.Fatalf("not an SVG document: %.80q", svg)
	}

	// Every goal is labelled with its figure, measured or not.
	for _, g := range fixture().Goals() {
		if !strings.Contains(svg, svgEscape(g.Name)) {
			t.Errorf("chart lacks goal %q", g.Name)
		}
	}

	golden.Compare(t, GoalsChartFile, b.Bytes())
}

// svgEscape escapes text as the SVG writer does in its text elements.
func svgEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// TestGoalsChartBars checks the bars against the goals: met green, missed
// red, a missing figure no bar, a bar far past its goal cut at the axis.
func TestGoalsChartBars(t *testing.T) {
	goals := fixture().Goals()

	var met, missed, bars int

	for _, g := range goals {
		switch {
		case g.Margin <= 0 && g.Measured != missing:
			t.Errorf("goal %q measured %s has no margin", g.Name, g.Measured)
		case g.Margin > 0 && g.Met != (g.Margin >= 1) && !strings.Contains(g.Measured, "failed"):
			t.Errorf("goal %q: met = %v but margin %.2f", g.Name, g.Met, g.Margin)
		}

		if g.Margin > 0 {
			bars++
		}

		if g.Met {
			met++
		} else if g.Margin > 0 {
			missed++
		}
	}

	if bars == 0 || met == 0 || missed == 0 {
		t.Fatalf("fixture should have met and missed goals: %d bars, %d met, %d missed", bars, met, missed)
	}

	if span := chartSpan(goals); span < chartMinSpan || span > chartMaxSpan {
		t.Fatalf("x axis ends at %.2f, outside [%v, %v]", span, chartMinSpan, chartMaxSpan)
	}

	if err := WriteGoalsChart(&bytes.Buffer{}, &Report{}); err != nil {
		t.Fatalf("a run with no figures must still chart its goals as not measured: %v", err)
	}
}

func TestGoalSummary(t *testing.T) {
	r := &Report{Goals: []Goal{
		{Name: "a", Measured: "1.00×", Met: true},
		{Name: "b", Measured: "0.50×"},
		{Name: "c", Measured: missing},
	}}

	if got, want := r.GoalSummary(), "goals: 1 of 3 met, 1 missed, 1 not measured"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}

	r.Goals = r.Goals[:2]
	if got, want := r.GoalSummary(), "goals: 1 of 2 met, 1 missed"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
}

// TestGoalsChartOldResults: a results file written before goals had
// margins is charted from its typed figures, here the same chart.
func TestGoalsChartOldResults(t *testing.T) {
	r := goldenReport(t)

	var want bytes.Buffer
	if err := WriteGoalsChart(&want, r); err != nil {
		t.Fatal(err)
	}

	for i := range r.Goals {
		r.Goals[i].Margin = 0
	}

	var got bytes.Buffer
	if err := WriteGoalsChart(&got, r); err != nil {
		t.Fatal(err)
	}

	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("the chart of goals without margins differs from the chart of the same figures with them")
	}
}
