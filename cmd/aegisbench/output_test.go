package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFromResultsFile makes the report again from the golden results file
// of e2e/bench, running nothing: the table, the document with its chart
// embedded, the charts next to the results file and to the document, and
// the goals' summary as the last line.
func TestFromResultsFile(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.json")

	data, err := os.ReadFile(filepath.Join("..", "..", "e2e", "bench", "testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(results, data, 0o600); err != nil {
		t.Fatal(err)
	}

	doc := filepath.Join(dir, "docs", "benchmarks.md")

	var stdout, stderr bytes.Buffer

	err = run(context.Background(), []string{"--from", results, "--doc", doc}, &stdout, &stderr)
	// The golden results record a failed part, which the exit status keeps.
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("run = %v, want the failed part reported", err)
	}

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if last := lines[len(lines)-1]; last != "goals: 12 of 18 met, 6 missed" {
		t.Errorf("last line = %q, want the goals' summary", last)
	}

	for _, chart := range []string{filepath.Join(dir, "goals.svg"), filepath.Join(dir, "docs", "benchmarks", "goals.svg")} {
		svg, err := os.ReadFile(chart)
		if err != nil {
			t.Fatal(err)
		}

		if !bytes.Contains(svg, []byte("</svg>")) {
			t.Errorf("%s is not an SVG document", chart)
		}
	}

	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}

	if !bytes.Contains(md, []byte("](benchmarks/goals.svg)")) {
		t.Errorf("document does not embed its chart:\n%s", md)
	}
}
