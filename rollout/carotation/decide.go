package carotation

import (
	"errors"
	"fmt"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// decide picks the action of a run from the recorded rotation (nil: none
// ever recorded) and the flags, and the first step to run.
func decide(rec *rotation.Rotation, resume, rollback bool) (Action, int32, error) {
	inProgress := rotationstate.InProgress(rec)

	switch {
	case resume && rollback:
		return 0, 0, errors.New("--resume and --rollback exclude each other")
	case !inProgress && (resume || rollback):
		return 0, 0, errors.New("no rotation of this CA is in progress: nothing to resume or roll back")
	case inProgress && !resume && !rollback:
		return 0, 0, fmt.Errorf("a rotation started by %q at %s has completed step %d: complete it with --resume, or undo it with --rollback (before step 2)",
			rec.GetStartedBy(), rec.GetStartedAt().AsTime().UTC().Format("2006-01-02 15:04:05Z"), rec.GetStep())
	case rollback && rec.GetStep() >= rotationstate.StepIssuing:
		return 0, 0, ErrNotRollbackable
	case rollback:
		return Rollback, rotationstate.StepRolledBack, nil
	case resume:
		return Resume, rec.GetStep() + 1, nil
	default:
		return Start, rotationstate.StepAccepted, nil
	}
}

// stepsToRun are the steps from first up to until (0: all).
func stepsToRun(first, until int32) []int32 {
	if until <= 0 || until > rotationstate.StepDone {
		until = rotationstate.StepDone
	}

	var out []int32
	for s := max(first, rotationstate.StepAccepted); s <= until; s++ {
		out = append(out, s)
	}

	return out
}
