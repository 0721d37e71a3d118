package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/internal/reclaim"
)

// The stream flood: floodReaders readers, each over floodConns
// connections, each connection trying floodPerConn Events follows. One
// reader more than the node's cap needs, so every cap is reached.
const (
	floodReaders = apid.MaxStreams/apid.MaxStreamsPerIdentity + 1
	floodConns   = 3
	floodPerConn = apid.MaxStreamsPerConnection + 22
	// floodSettle is how long after the follows close the memory is read
	// again: reclaim's delay, and time for the runtime to hand it back.
	floodSettle = reclaim.Delay + 4*time.Second
)

// StreamFlood is apid's and machined's memory under a flood of Events
// follows on the control plane.
type StreamFlood struct {
	Tried  int `json:"tried"`
	Opened int `json:"opened"`
	// Refused counts the follows refused ResourceExhausted, by the cap
	// their refusal names.
	Refused map[string]int `json:"refused"`
	// Memory is VmRSS of each process before, with the follows open, and
	// floodSettle after they closed.
	Memory []FloodMemory `json:"memory"`
}

// FloodMemory is one process's VmRSS around a flood, in bytes.
type FloodMemory struct {
	Process string `json:"process"`
	Idle    uint64 `json:"idle_rss_bytes"`
	Peak    uint64 `json:"peak_rss_bytes"`
	After   uint64 `json:"after_rss_bytes"`
}

// streamFlood opens as many follows on the control plane as the readers
// are given, reads apid's and machined's memory, closes them all and
// reads it again.
func (r *run) streamFlood(ctx context.Context, e *clusterEnv) error {
	names := []string{"apid", "machined"}
	r.logf("stream flood: %d readers × %d connections × %d Events follows", floodReaders, floodConns, floodPerConn)

	// Every reader's certificate first, so that the idle figures hold the
	// code that issued them.
	cfgs := make([]*clientconfig.Config, floodReaders)
	for i := range cfgs {
		var err error
		if cfgs[i], err = ReaderConfig(ctx, e.cli, time.Hour); err != nil {
			return err
		}
	}

	idle := e.rss(names)
	flood, stop := context.WithCancel(ctx)
	defer stop()

	f := &StreamFlood{Tried: floodReaders * floodConns * floodPerConn, Refused: Refusals{}}

	var all []*client.Client
	defer func() { _ = CloseAll(all) }() //nolint:errcheck // clients of the flood

	for _, cfg := range cfgs {
		clients, err := Connect(flood, cfg, floodConns)
		all = append(all, clients...)

		if err != nil {
			return err
		}

		for _, c := range clients {
			n, err := OpenFollows(flood, c, floodPerConn, f.Refused)
			if err != nil {
				return err
			}

			f.Opened += n
		}
	}

	peak := e.rss(names)

	stop()

	if err := errors.Join(CloseAll(all), sleep(ctx, floodSettle)); err != nil {
		return err
	}

	after := e.rss(names)
	for i, name := range names {
		f.Memory = append(f.Memory, FloodMemory{Process: name, Idle: idle[i], Peak: peak[i], After: after[i]})
	}

	r.res.Streams = f
	r.logf("stream flood: %d of %d follows open; %s", f.Opened, f.Tried, f.refusals())

	return nil
}

// rss reads VmRSS of the control plane's processes by name.
func (e *clusterEnv) rss(names []string) []uint64 {
	out := make([]uint64, len(names))
	for i, n := range names {
		out[i], _, _ = readMemory(e.cpProcs[n]) //nolint:errcheck // a missing figure shows as 0
	}

	return out
}

func (f *StreamFlood) refusals() string {
	parts := make([]string, 0, len(f.Refused))
	for _, limit := range slices.Sorted(maps.Keys(f.Refused)) {
		parts = append(parts, fmt.Sprintf("%d refused %s", f.Refused[limit], limit))
	}

	if len(parts) == 0 {
		return "none refused"
	}

	return strings.Join(parts, ", ")
}

func (r Results) streamFloodSection() Section {
	f := r.Streams
	s := Section{
		Title: "stream flood",
		How: fmt.Sprintf("%d os:reader clients × %d connections × %d Events follows through the control plane's apid, "+
			"each held open; VmRSS before, with the follows open, and %s after they closed; %s",
			floodReaders, floodConns, floodPerConn, formatDuration(floodSettle), f.refusals()),
	}

	for _, m := range f.Memory {
		perFollow := 0.0
		if f.Opened > 0 && m.Peak > m.Idle {
			perFollow = float64(m.Peak-m.Idle) / 1024 / float64(f.Opened)
		}

		s.Rows = append(s.Rows, Row{
			Name: m.Process + " RSS",
			Note: fmt.Sprintf("idle %s, %d follows open %s (%.1f KiB per follow), after %s",
				formatMiB(m.Idle), f.Opened, formatMiB(m.Peak), perFollow, formatMiB(m.After)),
		})
	}

	return s
}
