package bench

import (
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// GoalsChartFile is the name of the goals chart in a report's chart folder.
const GoalsChartFile = "goals.svg"

// The goals chart's geometry: a row per goal, and a cap on the bars so that
// one goal beaten many times over does not squash the others (its label
// still gives the figure).
const (
	chartWidth     = 13 * vg.Inch
	chartRowHeight = 0.32 * vg.Inch
	chartMargins   = 1.3 * vg.Inch
	chartMinSpan   = 2.0 // the x axis reaches at least twice the goal
	chartMaxSpan   = 4.0 // and at most four times it: longer bars are cut
)

var (
	colorMet    = color.RGBA{R: 0x2e, G: 0x7d, B: 0x32, A: 0xff}
	colorMissed = color.RGBA{R: 0xc6, G: 0x28, B: 0x28, A: 0xff}
	colorGoal   = color.RGBA{A: 0xff}
)

// WriteGoalsChart draws the report's goals as an SVG chart: a bar per
// goal, its figure relative to the goal with 1 the goal itself and longer
// better (Goal.Margin), green where met and red where missed; a goal not
// measured has a label and no bar. It draws from the report alone, so the
// chart of a results file is drawn again without running anything. A
// results file written before goals had margins is measured again from its
// Results, against today's goals.
func WriteGoalsChart(w io.Writer, r *Report) error {
	goals := r.Goals
	if !slices.ContainsFunc(goals, func(g Goal) bool { return g.Margin > 0 }) {
		goals = r.Results.Goals()
	}

	p, height, err := goalsPlot(goals)
	if err != nil {
		return err
	}

	wt, err := p.WriterTo(chartWidth, height, "svg")
	if err != nil {
		return fmt.Errorf("bench: drawing the goals chart: %w", err)
	}

	_, err = wt.WriteTo(w)

	return err
}

// goalsPlot lays out the goals chart and says how tall it is.
func goalsPlot(goals []Goal) (*plot.Plot, vg.Length, error) {
	if len(goals) == 0 {
		return nil, 0, fmt.Errorf("bench: no goals to chart")
	}

	p := plot.New()
	p.Title.Text = "Goals: each figure relative to its goal (dashed line); green met, red missed; longer is better"
	p.X.Label.Text = "measured ÷ goal for a floor, goal ÷ measured for a ceiling"
	p.X.Min, p.X.Max = 0, chartSpan(goals)

	labels := make([]string, len(goals))

	for i, g := range goals {
		row := len(goals) - 1 - i // the first goal on top
		labels[row] = goalLabel(g)

		if g.Margin <= 0 {
			continue
		}

		bar, err := goalBar(row, min(g.Margin, p.X.Max), g.Met)
		if err != nil {
			return nil, 0, err
		}

		p.Add(bar)
	}

	if err := addGoalLine(p, len(goals)); err != nil {
		return nil, 0, err
	}

	p.NominalY(labels...)

	return p, chartMargins + chartRowHeight*vg.Length(len(goals)), nil
}

// chartSpan is the end of the x axis: a little past the longest bar,
// between chartMinSpan and chartMaxSpan.
func chartSpan(goals []Goal) float64 {
	longest := slices.MaxFunc(goals, func(a, b Goal) int { return cmpFloat(a.Margin, b.Margin) }).Margin

	return min(max(longest*1.1, chartMinSpan), chartMaxSpan)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}

	return 0
}

// goalLabel names the goal with its figure and target, and says when the
// figure is missing.
func goalLabel(g Goal) string {
	if g.Margin <= 0 {
		return fmt.Sprintf("%s: not measured (goal %s)", g.Name, g.Target)
	}

	return fmt.Sprintf("%s: %s (goal %s)", g.Name, g.Measured, g.Target)
}

func goalBar(row int, v float64, met bool) (*plotter.BarChart, error) {
	bar, err := plotter.NewBarChart(plotter.Values{v}, chartRowHeight*0.7)
	if err != nil {
		return nil, fmt.Errorf("bench: drawing the goals chart: %w", err)
	}

	bar.Horizontal = true
	bar.XMin = float64(row)
	bar.LineStyle.Width = 0
	bar.Color = colorMissed

	if met {
		bar.Color = colorMet
	}

	return bar, nil
}

// addGoalLine draws the goal itself, 1, across every row.
func addGoalLine(p *plot.Plot, rows int) error {
	line, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(rows) - 0.5}})
	if err != nil {
		return fmt.Errorf("bench: drawing the goals chart: %w", err)
	}

	line.Color = colorGoal
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(line)

	return nil
}
