package carotation

import (
	"context"
	"crypto/x509/pkix"
	"slices"

	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout"
)

// Plan is what a run would do, for a dry run to show.
type Plan struct {
	// Kind names the CA.
	Kind string
	// InEffect is the CA in effect on Members[0], a control plane.
	InEffect pkix.Name
	// Members are those that hold the CA, in the order steps change them.
	Members []rollout.Member
	// Action is what the run would do.
	Action Action
	// NewCA is the new CA a rollback drops.
	NewCA pkix.Name
	// Steps are the steps the run would go through, with their names.
	Steps []Step
	// Skipped counts the workers that hold no CA of the kind.
	Skipped int
	// ClientStops: step 3 is run, after which client configs that trust
	// only the old CA stop working.
	ClientStops bool
}

// Step is a step of a plan.
type Step struct {
	N    int32
	Name string
}

// Plan says what Run would do.
func (r *Rotation) Plan(ctx context.Context) (*Plan, error) {
	cp, err := r.firstConfig(ctx)
	if err != nil {
		return nil, err
	}

	p := &Plan{
		Kind: r.kind.Name, InEffect: r.kind.Config.Issuing(cp).Subject, Members: r.members, Action: r.action, Skipped: r.skipped,
		ClientStops: slices.Contains(r.steps, rotationstate.StepDone) && r.kind.ClientFollows,
	}

	if r.action == Rollback {
		p.NewCA = r.recNew().Subject

		return p, nil
	}

	for _, s := range r.steps {
		p.Steps = append(p.Steps, Step{N: s, Name: r.kind.StepName(s)})
	}

	return p, nil
}
