package main

import (
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
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

func TestDescribeMachineStatus(t *testing.T) {
	spec := &runtime.MachineStatusSpec{Stage: runtime.MachineStageBooting}
	spec.Status.UnmetConditions = []runtime.UnmetCondition{{Name: "time", Reason: "waiting for NTP"}}

	if got := describeMachineStatus(spec); got != "booting, not ready (time: waiting for NTP)" {
		t.Errorf("got %q", got)
	}

	spec = &runtime.MachineStatusSpec{Stage: runtime.MachineStageRunning}
	spec.Status.Ready = true

	if got := describeMachineStatus(spec); got != "running, ready" {
		t.Errorf("got %q", got)
	}
}
