package carotation

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// TestDecide: what a run does, from the recorded rotation and the flags.
func TestDecide(t *testing.T) {
	at := func(step int32) *rotation.Rotation {
		return &rotation.Rotation{Ca: "os", Step: step, StartedBy: "O=os:admin", StartedAt: timestamppb.Now()}
	}

	tests := []struct {
		name             string
		rec              *rotation.Rotation
		resume, rollback bool
		action           Action
		first            int32
		fails            bool
	}{
		{name: "none recorded: start", action: Start, first: rotationstate.StepAccepted},
		{name: "done: start another", rec: at(rotationstate.StepDone), action: Start, first: rotationstate.StepAccepted},
		{name: "rolled back: start another", rec: at(rotationstate.StepRolledBack), action: Start, first: rotationstate.StepAccepted},
		{name: "none recorded: nothing to resume", resume: true, fails: true},
		{name: "done: nothing to roll back", rec: at(rotationstate.StepDone), rollback: true, fails: true},
		{name: "in progress: never started over", rec: at(rotationstate.StepAccepted), fails: true},
		{name: "started: resume from step 1", rec: at(rotationstate.StepStarted), resume: true, action: Resume, first: rotationstate.StepAccepted},
		{name: "step 1 done: resume at step 2", rec: at(rotationstate.StepAccepted), resume: true, action: Resume, first: rotationstate.StepIssuing},
		{name: "step 2 done: resume at step 3", rec: at(rotationstate.StepIssuing), resume: true, action: Resume, first: rotationstate.StepDone},
		{name: "step 1 done: roll back", rec: at(rotationstate.StepAccepted), rollback: true, action: Rollback, first: rotationstate.StepRolledBack},
		{name: "step 2 done: no rollback", rec: at(rotationstate.StepIssuing), rollback: true, fails: true},
		{name: "both flags", rec: at(rotationstate.StepAccepted), resume: true, rollback: true, fails: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			action, first, err := decide(tt.rec, tt.resume, tt.rollback)
			if (err != nil) != tt.fails {
				t.Fatalf("error %v, want failure %v", err, tt.fails)
			}

			if err == nil && (action != tt.action || first != tt.first) {
				t.Fatalf("decide = %d from step %d, want %d from step %d", action, first, tt.action, tt.first)
			}
		})
	}
}

func TestStepsToRun(t *testing.T) {
	for _, tt := range []struct {
		first, until int32
		want         []int32
	}{
		{1, 0, []int32{1, 2, 3}},
		{1, 1, []int32{1}},
		{2, 2, []int32{2}},
		{3, 0, []int32{3}},
		{3, 2, nil},
		{0, 0, []int32{1, 2, 3}},
	} {
		if got := stepsToRun(tt.first, tt.until); !slices.Equal(got, tt.want) {
			t.Errorf("stepsToRun(%d, %d) = %v, want %v", tt.first, tt.until, got, tt.want)
		}
	}
}
