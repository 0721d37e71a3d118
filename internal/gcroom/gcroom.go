// Package gcroom bounds how far a Go program's heap grows between
// collections by a size, where GOGC makes it a multiple of what the
// program holds.
//
// GOGC's multiple suits a program that holds little: collecting seldom
// saves CPU and costs a few MiB. It wastes memory in one that holds much:
// at 400 % a heap of 150 MiB live grows to 750 MiB before the next
// collection, or to GOMEMLIMIT, which then makes the collector run often
// exactly when memory is short. trustd is both: 2–3 MiB live while it
// signs, 100–300 MiB while it keeps the connections of thousands of
// workers. Run lowers the GOGC percentage as the program holds more, so
// that the heap grows by at most Config.Room between collections, and
// raises it again, up to Config.Percent, as the program holds less.
//
// The runtime offers a ceiling (GOMEMLIMIT) but no such bound, and the
// GOGC tuners published as libraries aim at a memory threshold, which
// GOMEMLIMIT now does itself; hence a package of our own, of a pure
// decision (Percent) and a loop that applies it.
package gcroom

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Defaults of a Config.
const (
	// DefaultMinPercent is the least percentage set: at 10 % a heap that
	// holds 640 MiB still has 64 MiB of room, and the collector does not
	// run for every few allocations.
	DefaultMinPercent = 10
	// DefaultInterval is how often Run looks at what the program holds:
	// a program's connections come and go over seconds, not faster.
	DefaultInterval = time.Second
)

// Config says how a program's collections are paced.
type Config struct {
	// Percent is the GOGC percentage while the room it gives is within
	// Room, and the most that is ever set. Required.
	Percent int
	// Room bounds, in bytes, how far the heap grows beyond what is live
	// between two collections. Required.
	Room uint64
	// MinPercent is the least percentage set, however much the program
	// holds; zero means DefaultMinPercent.
	MinPercent int
	// Interval between looks at what the program holds; zero means
	// DefaultInterval.
	Interval time.Duration
	// Clock times the looks; nil means the system clock.
	Clock clock.Clock
	// Held reads what the program held at the last collection; nil means
	// the runtime's own figures (Sample).
	Held func() uint64
	// Set puts a percentage in force and returns the one it replaces; nil
	// means debug.SetGCPercent.
	Set func(int) int
	// InForce is the percentage in force when Run starts, set by its
	// caller: Run sets none until another is due. Zero means unknown, and
	// Run sets one at once.
	InForce int
}

// Percent is the GOGC percentage that grows the heap by at most room
// beyond held bytes, within [least, most]. The runtime grows the heap by
// the percentage of what it scans: the live heap, the goroutines' stacks
// and the globals.
func Percent(held, room uint64, least, most int) int {
	if held == 0 {
		return most
	}

	p := room * 100 / held

	return int(min(max(p, uint64(least)), uint64(most)))
}

// Run sets the percentage now and at every Interval until ctx ends.
func Run(ctx context.Context, cfg Config) {
	least := cfg.MinPercent
	if least == 0 {
		least = DefaultMinPercent
	}

	interval := cfg.Interval
	if interval == 0 {
		interval = DefaultInterval
	}

	held, set := cfg.Held, cfg.Set
	if held == nil {
		held = Sample
	}

	if set == nil {
		set = debug.SetGCPercent
	}

	clk := defaults.Clock(cfg.Clock)

	current := cfg.InForce
	if current == 0 {
		current = -1
	}

	for {
		// Setting a percentage makes the runtime work out its goal again:
		// only a change is worth it.
		if p := Percent(held(), cfg.Room, least, cfg.Percent); p != current {
			set(p)
			current = p
		}

		if !clock.Sleep(ctx, clk, interval) {
			return
		}
	}
}

// heldMetrics are what the collector scans, as of the last collection.
var heldMetrics = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// Sample is what the program held at its last collection: its live heap,
// its goroutines' stacks and its globals, the bytes GOGC's percentage is
// of.
func Sample() uint64 {
	samples := make([]metrics.Sample, len(heldMetrics))
	for i, name := range heldMetrics {
		samples[i].Name = name
	}

	metrics.Read(samples)

	var total uint64

	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			total += s.Value.Uint64()
		}
	}

	return total
}
