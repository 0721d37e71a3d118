package main

import (
	"context"
	"runtime/debug"

	"github.com/aegis-os/aegis/internal/gcroom"
	"github.com/aegis-os/aegis/trustd"
)

// tuneGC sets trustd's collections to be paced (internal/gcroom): at
// trustd.GCPercent while trustd holds little, and with the heap's growth
// between two collections bounded by trustd.GCRoom (or what it allocates
// in trustd.GCEvery, under load) while it holds the connections of many
// workers; unless the operator chose a percentage through GOGC (lookup is
// os.LookupEnv). It returns the percentage in force now and the pacing to
// run until trustd stops, nil under GOGC. GOMEMLIMIT, which machined
// sets, still bounds the heap.
func tuneGC(lookup func(string) (string, bool)) (int, func(context.Context)) {
	if _, set := lookup("GOGC"); set {
		// SetGCPercent returns the setting it replaces: put it back.
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)

		return p, nil
	}

	p := gcroom.Percent(gcroom.Sample(), trustd.GCRoom, gcroom.DefaultMinPercent, trustd.GCPercent)
	debug.SetGCPercent(p)

	return p, func(ctx context.Context) {
		gcroom.Run(ctx, gcroom.Config{Percent: trustd.GCPercent, Room: trustd.GCRoom, Every: trustd.GCEvery, InForce: p})
	}
}
