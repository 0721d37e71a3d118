// Package rotationstate names the steps of a CA rotation as the cluster
// records them (aegis.rotation.Rotation.step) and reads a record's state.
// Both sides use it: the rotation service that stores the record on the
// control planes and the clients that drive a rotation, so it imports
// nothing but the generated API.
package rotationstate

import "github.com/aegis-os/aegis/api/rotation"

// Steps of a rotation, as Rotation.step records the last one completed.
const (
	StepRolledBack = -1
	StepStarted    = 0
	StepAccepted   = 1
	StepIssuing    = 2
	StepDone       = 3
)

// Kinds returns the CA kinds a rotation is recorded for.
func Kinds() []string { return []string{"os", "etcd"} }

// InProgress reports whether a recorded rotation still has steps to run.
func InProgress(r *rotation.Rotation) bool {
	return r != nil && r.GetStep() >= StepStarted && r.GetStep() < StepDone
}
