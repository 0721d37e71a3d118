package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

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

func TestServiceProblems(t *testing.T) {
	running := func(id string, health *machine.ServiceHealth) *machine.ServiceInfo {
		return &machine.ServiceInfo{Id: id, State: "Running", Health: health}
	}

	tests := []struct {
		name         string
		services     []*machine.ServiceInfo
		controlPlane bool
		want         string
	}{
		{name: "all up", services: []*machine.ServiceInfo{running("apid", &machine.ServiceHealth{Healthy: true})}},
		{name: "no health check", services: []*machine.ServiceInfo{running("apid", nil)}},
		{
			name:     "starting and unhealthy",
			services: []*machine.ServiceInfo{{Id: "apid", State: "Starting"}, running("trustd", &machine.ServiceHealth{LastMessage: "NOT_SERVING"})},
			want:     "apid is Starting; trustd is unhealthy: NOT_SERVING",
		},
		{name: "health not known yet", services: []*machine.ServiceInfo{running("apid", &machine.ServiceHealth{Unknown: true})}, want: "apid has not passed its health check yet"},
		{name: "nothing loaded", want: "no services yet"},
		{
			name: "control plane without trustd", controlPlane: true,
			services: []*machine.ServiceInfo{running("apid", nil)},
			want:     "trustd is not running (is it a control plane?)",
		},
		{name: "control plane", controlPlane: true, services: []*machine.ServiceInfo{running("apid", nil), running("trustd", nil)}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serviceProblems(tt.services, tt.controlPlane); got != tt.want {
				t.Fatalf("serviceProblems = %q, want %q", got, tt.want)
			}
		})
	}
}
