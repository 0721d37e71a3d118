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
// that the heap grows by at most a room between collections, and raises
// it again, up to Config.Percent, as the program holds less.
//
// The room is Config.Room while the program allocates little, and what it
// allocated in Config.Every at its fastest lately while it allocates
// more: a program at rest keeps its memory near what it holds, one under
// load collects no more often than every Every, as GOGC alone would
// have it. A fixed room of 64 MiB cost trustd a sixth more CPU while it
// took 333 heartbeats a second.
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
	"slices"
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
	// between two collections while the program allocates less than Room
	// in Every. Required.
	Room uint64
	// Every is the least time between two collections the room aims at
	// under load: the room is what the program allocated in Every, at its
	// fastest over the last Every, when that is more than Room. Zero
	// keeps the room at Room.
	Every time.Duration
	// Allocated reads the bytes the program has allocated since it
	// started; nil means the runtime's own figure (Allocated).
	Allocated func() uint64
	// Release collects and returns the heap's free memory to the system,
	// run once each time the load ends (the room falls back to Room):
	// what a burst left behind goes then, rather than as the next
	// collections come, which at rest are rare. Nil means
	// debug.FreeOSMemory.
	Release func()
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

// RoomFor is the room a program that allocated at most peak bytes in any
// interval of the last every has: peak scaled to every, or floor when
// that is less.
func RoomFor(floor, peak uint64, interval, every time.Duration) uint64 {
	if every <= 0 || interval <= 0 {
		return floor
	}

	return max(floor, peak*uint64(every/interval))
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

	held, set, allocated := cfg.Held, cfg.Set, cfg.Allocated
	if held == nil {
		held = Sample
	}

	if allocated == nil {
		allocated = Allocated
	}

	release := cfg.Release
	if release == nil {
		release = debug.FreeOSMemory
	}

	if set == nil {
		set = debug.SetGCPercent
	}

	clk := defaults.Clock(cfg.Clock)

	current := cfg.InForce
	if current == 0 {
		current = -1
	}

	// recent are the bytes allocated in each of the last intervals, as
	// many as make up Every.
	recent := make([]uint64, max(1, int(cfg.Every/interval)))
	last, next, loaded := allocated(), 0, false

	for {
		now := allocated()
		recent[next], last, next = now-last, now, (next+1)%len(recent)

		room := RoomFor(cfg.Room, slices.Max(recent), interval, cfg.Every)

		// Setting a percentage makes the runtime work out its goal again:
		// only a change is worth it.
		if p := Percent(held(), room, least, cfg.Percent); p != current {
			set(p)
			current = p
		}

		if loaded && room == cfg.Room {
			release()
		}

		loaded = room > cfg.Room

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

// Allocated is the bytes the program has allocated on its heap since it
// started.
func Allocated() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)

	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}

	return sample[0].Value.Uint64()
}
