package membership_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/membership"
)

func TestHeartbeatTableFull(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s := membership.NewServer(membership.ServerConfig{Clock: clk})

	for i := range membership.MaxHeartbeatSources {
		if err := membership.Space(s, fmt.Sprintf("node-%d", i)); err != nil {
			t.Fatalf("node %d of %d: %v", i, membership.MaxHeartbeatSources, err)
		}
	}

	if err := membership.Space(s, "one-too-many"); err == nil {
		t.Fatal("a node beyond a full table was let through")
	}

	clk.Advance(membership.MinHeartbeatSpacing)

	// A node the full table knows keeps its heartbeats.
	if err := membership.Space(s, "node-0"); err != nil {
		t.Fatalf("a known node's next heartbeat with the table full: %v", err)
	}

	// The silent ones leave it, and a new node comes in.
	clk.Advance(membership.MaxInterval + time.Second)

	if err := membership.Space(s, "one-too-many"); err != nil {
		t.Fatalf("a new node once the table was pruned: %v", err)
	}
}
