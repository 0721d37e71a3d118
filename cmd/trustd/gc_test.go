package main

import (
	"runtime/debug"
	"testing"

	"github.com/aegis-os/aegis/internal/gcroom"
	"github.com/aegis-os/aegis/trustd"
)

// TestTuneGC: trustd runs with the percentage gcroom gives what it holds,
// at most trustd.GCPercent, and paces it, unless GOGC says otherwise; then
// it leaves the runtime's setting alone and paces nothing.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	unset := func(string) (string, bool) { return "", false }

	got, pace := tuneGC(unset)
	if got < gcroom.DefaultMinPercent || got > trustd.GCPercent || pace == nil {
		t.Fatalf("without GOGC: %d (pacing %v), want within [%d, %d], paced", got, pace != nil, gcroom.DefaultMinPercent, trustd.GCPercent)
	}

	if now := debug.SetGCPercent(100); now != got {
		t.Fatalf("without GOGC the runtime runs at %d, want %d", now, got)
	}

	set := func(k string) (string, bool) { return "100", k == "GOGC" }
	if got, pace := tuneGC(set); got != 100 || pace != nil {
		t.Fatalf("with GOGC=100: %d (pacing %v), want 100, not paced", got, pace != nil)
	}

	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("with GOGC=100 the runtime runs at %d", now)
	}
}
