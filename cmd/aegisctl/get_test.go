package main

import "testing"

func TestColumnReadsSimplePaths(t *testing.T) {
	spec := map[string]any{
		"stage":   "running",
		"status":  map[string]any{"ready": true},
		"aliases": []any{"ms", "machinestatus"},
	}

	for path, want := range map[string]string{
		"{.stage}":        "running",
		"{.status.ready}": "true",
		"{.aliases[:]}":   "ms,machinestatus",
		"{.missing.deep}": "",
		"{.stage.deeper}": "",
	} {
		if got := column(spec, path); got != want {
			t.Errorf("column(%s) = %q, want %q", path, got, want)
		}
	}
}
