// Package carotation is the rotation of a cluster's CA while it serves, on
// the rollout engine: three steps, each verified on every member that
// holds the CA before the next (1. accept the new CA, 2. issue from it,
// 3. drop the old one), the rotation's state recorded in etcd, so an
// interrupted rotation is resumed or (before step 2) rolled back. What
// differs between the OS CA and the etcd CA is a Kind.
package carotation

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout"
)

// Options are a rotation's: the walker's and the rotation's own.
type Options struct {
	rollout.Options
	// Kind is the CA rotated. Required.
	Kind Kind
	// Resume completes the rotation in progress; Rollback undoes it
	// (before step 2). Neither: a new rotation starts.
	Resume, Rollback bool
	// UntilStep stops after this step (1 or 2), to resume later. Zero:
	// every step.
	UntilStep int32
	// KeyPath is where the new CA's certificate and key are kept (mode
	// 0600) from the start until step 2 is recorded. Required.
	KeyPath string
	// Secrets is a secrets bundle whose CA of the kind becomes the new one
	// (mode 0600) when the rotation ends. Empty: none.
	Secrets string
	// ClientConfig is the path of the client config in use, which step 2
	// replaces when Kind.ClientFollows (SwitchClient writes it); named in
	// the progress lines. Empty: not named.
	ClientConfig string
	// ClientCert is the client certificate in use: the one step 2 has
	// issued from the new CA has its roles and lifetime. Required when
	// Kind.ClientFollows.
	ClientCert *x509.Certificate
	// SwitchClient writes the CA bundle caPEM (and, when crt is not nil,
	// the client certificate and key) into the client config in use and
	// returns a client that calls with them. Required when
	// Kind.ClientFollows.
	SwitchClient func(ctx context.Context, caPEM, crt, key []byte) (*client.Client, error)
}

// Action is what a run does.
type Action int

// The actions.
const (
	// Start starts a new rotation and runs its steps.
	Start Action = iota
	// Resume runs the steps left of the recorded rotation.
	Resume
	// Rollback undoes a rotation that has not gone past step 1.
	Rollback
)

// Rotation is one run of a CA rotation, prepared: the record read, the
// action decided, the members listed and reachable.
type Rotation struct {
	opts   Options
	w      *rollout.Walker
	kind   Kind
	rec    *rollout.Record
	action Action
	steps  []int32

	members []rollout.Member
	skipped int // members that do not hold the CA
}

// Prepare reads the cluster and the recorded rotation and decides, before
// anything changes: a member that does not answer, or a --secrets bundle
// that does not fit, stops it here.
func Prepare(ctx context.Context, opts Options) (*Rotation, error) {
	w := rollout.New(opts.Options)
	r := &Rotation{opts: opts, w: w, kind: opts.Kind}

	var err error
	if r.rec, err = w.ReadRecord(ctx, r.kind.Name); err != nil {
		return nil, err
	}

	action, first, err := decide(r.rec.Get(), opts.Resume, opts.Rollback)
	if err != nil {
		return nil, err
	}

	r.action, r.steps = action, stepsToRun(first, opts.UntilStep)

	if err = r.loadMembers(ctx); err != nil {
		return nil, err
	}

	if err = r.checkReachable(ctx); err != nil {
		return nil, err
	}

	if err = r.checkSecrets(ctx); err != nil {
		return nil, err
	}

	return r, nil
}

// Run runs the rotation's steps; never in a dry run.
func (r *Rotation) Run(ctx context.Context) error {
	if r.w.DryRun() {
		return rollout.ErrDryRun
	}

	var err error

	switch r.action {
	case Rollback:
		return r.w.Timed(ctx, "rollback", r.rollback)
	case Start:
		err = r.start(ctx)
	case Resume:
		err = r.w.Timed(ctx, fmt.Sprintf("catching up with step %d", r.rec.Get().GetStep()), r.catchUp)
	}

	if err != nil {
		return err
	}

	return r.runSteps(ctx)
}

func (r *Rotation) runSteps(ctx context.Context) error {
	run := map[int32]func(context.Context) error{rotationstate.StepAccepted: r.step1, rotationstate.StepIssuing: r.step2, rotationstate.StepDone: r.step3}

	for _, step := range r.steps {
		name := fmt.Sprintf("step %d (%s)", step, r.kind.StepName(step))
		err := r.w.Timed(ctx, name, run[step])
		if err == nil {
			err = r.verify(ctx, step)
		}

		if err != nil {
			return fmt.Errorf("%s: %w\nthe rotation stopped after step %d; run again with --resume once the cause is fixed", name, err, r.rec.Get().GetStep())
		}

		if err := r.rec.Step(ctx, step); err != nil {
			return err
		}

		if step >= rotationstate.StepIssuing {
			if err := r.dropKeyFile(); err != nil {
				return err
			}
		}
	}

	if r.rec.Get().GetStep() < rotationstate.StepDone {
		r.w.Printf("stopped after step %d as asked; complete the rotation with 'aegisctl rotate-ca --dry-run=false --resume'\n", r.rec.Get().GetStep())

		return nil
	}

	r.w.Printf("rotation of the %s CA done: only the new CA is accepted on the %d members\n", r.kind.Name, len(r.members))

	return r.updateSecrets(ctx)
}

// verify runs the kind's own check of step, if it has one.
func (r *Rotation) verify(ctx context.Context, step int32) error {
	if r.kind.Verify == nil {
		return nil
	}

	return r.kind.Verify(ctx, Verification{Walker: r.w, Members: r.members, Step: step, Old: r.recOld(), New: r.recNew()})
}

func (r *Rotation) recNew() *x509.Certificate {
	c, _ := ca.ParseCertificate(r.rec.Get().GetNewCa())
	return c
}

func (r *Rotation) recOld() *x509.Certificate {
	c, _ := ca.ParseCertificate(r.rec.Get().GetOldCa())
	return c
}

// ErrNotRollbackable refuses a rollback once the new CA issues.
var ErrNotRollbackable = errors.New("the new CA already issues certificates (step 2 done): a rollback would lock them out; complete the rotation with --resume")
