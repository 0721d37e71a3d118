package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// The markers between which a document holds a run's results; everything
// outside them is written by hand and kept.
const (
	BeginResults = "<!-- results: written by the benchmark harness; edits inside are replaced -->"
	EndResults   = "<!-- end of results -->"
)

// WriteMarkdown prints the report as Markdown tables, for a document.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer

	fmt.Fprintf(&b, "%s run started %s", capitalize(r.Mode), r.Started.Format(time.RFC3339))
	if r.Revision != "" {
		fmt.Fprintf(&b, " at revision `%s`", r.Revision)
	}

	fmt.Fprintf(&b, ", %s in all.\n\n**Machine:** %s.\n", formatDuration(r.Elapsed), r.Machine.Summary())

	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n### %s\n\n%s.\n\n", s.Title, s.How)
		writeMarkdownTable(&b, s.grid())
	}

	if len(r.Memory) > 0 {
		fmt.Fprintf(&b, "\n### memory\n\n%s.\n\n", memoryHow)
		writeMarkdownTable(&b, memoryGrid(r.Memory))
	}

	b.WriteString("\n### goals\n\n")

	if r.ChartDir != "" {
		fmt.Fprintf(&b, "![%s](%s)\n\n", r.GoalSummary(), path.Join(r.ChartDir, GoalsChartFile))
	}

	writeMarkdownTable(&b, goalsGrid(r.Goals))

	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\n**Failed:** %s\n", f)
	}

	_, err := w.Write(b.Bytes())

	return err
}

func writeMarkdownTable(b *bytes.Buffer, g grid) {
	g = g.compact()
	if len(g) == 0 {
		return
	}

	line := func(cells []string) {
		escaped := make([]string, len(cells))
		for i, c := range cells {
			escaped[i] = strings.ReplaceAll(c, "|", `\|`)
		}

		fmt.Fprintf(b, "| %s |\n", strings.Join(escaped, " | "))
	}

	sep := make([]string, len(g[0]))
	for i := range sep {
		sep[i] = "---"
	}

	line(g[0])
	line(sep)

	for _, row := range g[1:] {
		line(row)
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}

	return strings.ToUpper(s[:1]) + s[1:]
}

// ReplaceResults puts results between the markers of doc, keeping
// everything outside them. A document without the markers is refused:
// the harness never guesses where results belong.
func ReplaceResults(doc, results []byte) ([]byte, error) {
	begin := bytes.Index(doc, []byte(BeginResults))
	end := bytes.Index(doc, []byte(EndResults))

	if begin < 0 || end < begin {
		return nil, errors.New("bench: document lacks the results markers in order")
	}

	var out bytes.Buffer

	out.Write(doc[:begin+len(BeginResults)])
	out.WriteString("\n\n")
	out.Write(bytes.TrimSpace(results))
	out.WriteString("\n\n")
	out.Write(doc[end:])

	return out.Bytes(), nil
}
