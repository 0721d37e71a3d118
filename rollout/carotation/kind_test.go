package carotation

import (
	"testing"

	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout"
)

// TestKindHolds: a kind of the control planes only skips workers; any
// other holds to every member.
func TestKindHolds(t *testing.T) {
	worker := rollout.Member{Addr: "10.0.0.5", Role: "worker"}
	cp := rollout.Member{Addr: "10.0.0.2", Role: "controlplane"}

	if k := (Kind{ControlPlanesOnly: true}); k.holds(worker) || !k.holds(cp) {
		t.Fatal("a kind of the control planes does not hold to control planes only")
	}

	if !(Kind{}).holds(worker) {
		t.Fatal("a kind of every member skips workers")
	}
}

// TestKindStepName: a kind names its own steps, and the OS CA's names
// stand for those it leaves empty.
func TestKindStepName(t *testing.T) {
	k := Kind{StepNames: [3]string{1: "own"}}
	if k.StepName(rotationstate.StepIssuing) != "own" || k.StepName(rotationstate.StepAccepted) != StepName(rotationstate.StepAccepted) {
		t.Fatalf("step names %q, %q", k.StepName(rotationstate.StepIssuing), k.StepName(rotationstate.StepAccepted))
	}

	if StepName(7) != "step 7" {
		t.Fatalf("an unknown step is %q", StepName(7))
	}
}
