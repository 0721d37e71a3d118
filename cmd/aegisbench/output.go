package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aegis-os/aegis/e2e/bench"
	"github.com/aegis-os/aegis/internal/atomicfile"
)

// write prints the table and writes the JSON and the document asked for.
func write(rep *bench.Report, opts options, stdout io.Writer) error {
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}

	if opts.jsonPath != "" {
		var buf bytes.Buffer
		if err := rep.WriteJSON(&buf); err != nil {
			return err
		}

		if err := writeFile(opts.jsonPath, buf.Bytes()); err != nil {
			return err
		}
	}

	if opts.docPath != "" {
		return writeDoc(rep, opts.docPath)
	}

	return nil
}

// writeDoc replaces the results between the document's markers; a document
// that does not exist yet is made of the markers and the results alone.
func writeDoc(rep *bench.Report, path string) error {
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
