package main

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

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
