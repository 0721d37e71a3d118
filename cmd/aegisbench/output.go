package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aegis-os/aegis/e2e/bench"
	"github.com/aegis-os/aegis/internal/atomicfile"
)

// write prints the table and writes the JSON, the document and the charts
// asked for. The goals chart goes next to the results file (--json, or
// --from's) and into the document's chart folder (see chartDir), where the
// document embeds it. A results file read with --from is not written again.
func write(rep *bench.Report, opts options, stdout io.Writer) error {
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}

	results := opts.from
	if results == "" && opts.jsonPath != "" {
		results = opts.jsonPath

		var buf bytes.Buffer
		if err := rep.WriteJSON(&buf); err != nil {
			return err
		}

		if err := writeFile(opts.jsonPath, buf.Bytes()); err != nil {
			return err
		}
	}

	if results != "" {
		if err := writeCharts(rep, filepath.Dir(results)); err != nil {
			return err
		}
	}

	if opts.docPath != "" {
		return writeDoc(rep, opts.docPath)
	}

	return nil
}

// readReport reads a results file written with --json, so that its table,
// document and charts are made again without running anything.
func readReport(path string) (*bench.Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the results file: %w", err)
	}

	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("results file %s: %w (expected the JSON of --json)", path, err)
	}

	return &rep, nil
}

// chartDir is the folder of a document's charts, relative to it: the
// document's name without its extension (docs/benchmarks.md's charts are
// in docs/benchmarks/).
func chartDir(docPath string) string {
	base := filepath.Base(docPath)

	return strings.TrimSuffix(base, filepath.Ext(base))
}

// writeCharts draws the report's charts into dir.
func writeCharts(rep *bench.Report, dir string) error {
	var svg bytes.Buffer
	if err := bench.WriteGoalsChart(&svg, rep); err != nil {
		return err
	}

	return writeFile(filepath.Join(dir, bench.GoalsChartFile), svg.Bytes())
}

// writeDoc replaces the results between the document's markers and draws
// the charts it embeds; a document that does not exist yet is made of the
// markers and the results alone.
func writeDoc(rep *bench.Report, path string) error {
	rep.ChartDir = chartDir(path)
	if err := writeCharts(rep, filepath.Join(filepath.Dir(path), rep.ChartDir)); err != nil {
		return err
	}

	var results bytes.Buffer
	if err := rep.WriteMarkdown(&results); err != nil {
		return err
	}

	doc, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		doc, err = []byte(bench.BeginResults+"\n"+bench.EndResults+"\n"), nil
	}

	if err != nil {
		return err
	}

	if doc, err = bench.ReplaceResults(doc, results.Bytes()); err != nil {
		return err
	}

	return writeFile(path, doc)
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}

	return atomicfile.Write(path, data, 0o644, atomicfile.Options{Overwrite: true})
}
