package main

import (
	"testing"
	"time"
)

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

func TestUntilText(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	for _, tt := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(23*time.Hour + 59*time.Minute + 30*time.Second), "23h59m"},
		{now.Add(3 * 24 * time.Hour), "3d"},
		{now.Add(-time.Second), "EXPIRED"},
		{time.Time{}, "none"},
	} {
		if got := untilText(tt.at, now); got != tt.want {
			t.Errorf("untilText(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}
