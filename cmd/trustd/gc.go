package main

import (
	"context"
	"runtime/debug"

	"github.com/aegis-os/aegis/internal/gcroom"
	"github.com/aegis-os/aegis/trustd"
)

// tuneGC paces trustd's collections (internal/gcroom): at
// trustd.GCPercent while trustd holds little, and with the heap's growth
// between two collections bounded by trustd.GCRoom while it holds the
// connections of many workers; unless the operator chose a percentage
// through GOGC (lookup is os.LookupEnv). It returns the percentage in
// force now; the pacing goes on until ctx ends. GOMEMLIMIT, which
// machined sets, still bounds the heap.
func tuneGC(ctx context.Context, lookup func(string) (string, bool)) int {
	if _, set := lookup("GOGC"); set {
		// SetGCPercent returns the setting it replaces: put it back.
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)

		return p
	}

	p := gcroom.Percent(gcroom.Sample(), trustd.GCRoom, gcroom.DefaultMinPercent, trustd.GCPercent)
	debug.SetGCPercent(p)

	go gcroom.Run(ctx, gcroom.Config{Percent: trustd.GCPercent, Room: trustd.GCRoom, InForce: p})

	return p
}
