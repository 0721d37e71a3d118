package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/clock"
)

// TestHealthWaitsOnTheCommandClock: health paces its rounds and measures
// its timeout on the command's clock, so a fake clock moved past the
// timeout ends the wait with the verdict.
func TestHealthWaitsOnTheCommandClock(t *testing.T) {
	c := newTestCluster(t, nil)
	c.writeConfig(t, role.Reader)

	clk := clock.NewFake(time.Now())
	done := make(chan error, 1)

	go func() {
		// Nothing listens there: every round finds the node not answering.
		_, _, err := runCLIClock(t, clk, "--aegisconfig", c.config, "-e", "127.0.0.1:1", "health", "--wait-timeout", "90s")
		done <- err
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for range 2 { // the rounds at 0 and 60s wait; the one at 120s is past the timeout
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatalf("health never waited on its clock: %v", err)
		}

		clk.Advance(time.Minute)
	}

	err := <-done
	if err == nil || !strings.Contains(err.Error(), "not healthy after 1m30s") || !strings.Contains(err.Error(), "not answering") {
		t.Fatalf("err = %v, want the timeout's verdict", err)
	}
}
