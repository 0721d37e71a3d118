package rotationstate_test

import (
	"testing"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/client/rotationstate"
)

func TestInProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *rotation.Rotation
		want bool
	}{
		{"no record", nil, false},
		{"rolled back", &rotation.Rotation{Step: rotationstate.StepRolledBack}, false},
		{"started", &rotation.Rotation{Step: rotationstate.StepStarted}, true},
		{"accepted", &rotation.Rotation{Step: rotationstate.StepAccepted}, true},
		{"issuing", &rotation.Rotation{Step: rotationstate.StepIssuing}, true},
		{"done", &rotation.Rotation{Step: rotationstate.StepDone}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rotationstate.InProgress(tc.rec); got != tc.want {
				t.Fatalf("InProgress = %v, want %v", got, tc.want)
			}
		})
	}
}
