package main

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/aegis-os/aegis/trustd"
)

// TestTuneGC: trustd runs with trustd.GCPercent while it holds little
// (as a test does) unless GOGC says otherwise, and then leaves the
// runtime's setting alone.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	unset := func(string) (string, bool) { return "", false }
	if got := tuneGC(ctx, unset); got != trustd.GCPercent {
		t.Fatalf("without GOGC: %d, want %d", got, trustd.GCPercent)
	}

	if now := debug.SetGCPercent(100); now != trustd.GCPercent {
		t.Fatalf("without GOGC the runtime runs at %d, want %d", now, trustd.GCPercent)
	}

	cancel()

	set := func(k string) (string, bool) { return "100", k == "GOGC" }
	if got := tuneGC(ctx, set); got != 100 {
		t.Fatalf("with GOGC=100: %d, want 100", got)
	}

	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("with GOGC=100 the runtime runs at %d", now)
	}
}
