package nodeview

import (
	"context"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/internal/replies"
)

// Events keeps the last events of the nodes, as lines the caller
// formats. Follow and Recent may be called at the same time.
type Events struct {
	// Keep is how many lines are kept, the most recent; zero keeps none.
	Keep int
	// Format turns an event into its line. Required.
	Format func(*machine.Event) string

	mu    sync.Mutex
	lines []string // the last Keep lines, oldest first
}

// Follow keeps the events of nodes (the endpoint's own when empty), the
// last Keep first, until ctx ends or the stream breaks. Replies that carry
// a node's failure are skipped.
func (e *Events) Follow(ctx context.Context, c *client.Client, nodes []string) {
	if len(nodes) > 0 {
		ctx = client.WithNodes(ctx, nodes...)
	}

	stream, err := c.MachineClient.Events(ctx, &machine.EventsRequest{TailEvents: int32(e.Keep)}) //nolint:gosec // bounded by the caller
	if err != nil {
		return
	}

	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}

		if _, failed := replies.Failure(ev.GetMetadata()); ev.GetData() == nil || failed {
			continue
		}

		e.add(e.Format(ev))
	}
}

func (e *Events) add(line string) {
	e.mu.Lock()
	defer e.mu.Unlock()

	e.lines = append(e.lines, line)
	if len(e.lines) > e.Keep {
		e.lines = e.lines[len(e.lines)-e.Keep:]
	}
}

// Recent returns the lines kept, oldest first.
func (e *Events) Recent() []string {
	e.mu.Lock()
	defer e.mu.Unlock()

	return append([]string(nil), e.lines...)
}
