package lifecycle

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

func TestDescribeMachineStatus(t *testing.T) {
	tests := []struct {
		name  string
		stage runtime.MachineStage
		ready bool
		unmet []runtime.UnmetCondition
		want  string
	}{
		{
			name: "waiting for time", stage: runtime.MachineStageBooting,
			unmet: []runtime.UnmetCondition{{Name: "time", Reason: "waiting for NTP"}},
			want:  "booting, not ready (time: waiting for NTP)",
		},
		{name: "ready", stage: runtime.MachineStageRunning, ready: true, want: "running, ready"},
		{name: "nothing unmet said", stage: runtime.MachineStageRebooting, want: "rebooting, not ready"},
		{
			name: "several unmet", stage: runtime.MachineStageRunning,
			unmet: []runtime.UnmetCondition{{Name: "time", Reason: "no sync"}, {Name: "services", Reason: "apid"}},
			want:  "running, not ready (time: no sync; services: apid)",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &runtime.MachineStatusSpec{Stage: tt.stage}
			spec.Status.Ready = tt.ready
			spec.Status.UnmetConditions = tt.unmet

			if got := DescribeMachineStatus(spec); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOrNothing(t *testing.T) {
	for in, want := range map[string]string{"": "nothing", "API down": "API down"} {
		if got := orNothing(in); got != want {
			t.Errorf("orNothing(%q) = %q, want %q", in, got, want)
		}
	}
}
