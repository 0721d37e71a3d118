package main

import (
	"runtime/debug"

	"github.com/aegis-os/aegis/trustd"
)

// tuneGC sets the garbage collector's target to trustd.GCPercent, unless
// the operator chose one through GOGC (lookup is os.LookupEnv). It
// returns the percentage now in force. GOMEMLIMIT, which machined sets
// for its containers, still bounds the heap.
func tuneGC(lookup func(string) (string, bool)) int {
	if _, set := lookup("GOGC"); set {
		// SetGCPercent returns the setting it replaces: put it back.
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)

		return p
	}

	debug.SetGCPercent(trustd.GCPercent)

	return trustd.GCPercent
}
