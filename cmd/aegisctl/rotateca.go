package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// rotateFlags are rotate-ca's flags.
type rotateFlags struct {
	kind             string
	dryRun           bool
	resume, rollback bool
	untilStep        int
	secrets          string
}

func newRotateCACommand(e *env) *cobra.Command {
	var f rotateFlags

	cmd := &cobra.Command{
		Use:   "rotate-ca",
		Short: "Rotate a CA of the cluster while it serves (admin only)",
		Long: `Replace the cluster's OS CA with a new one, through the endpoint (a control
plane), on every member of the cluster, in three steps, each verified on every
member before the next:
  1. generate the new CA (same key type as the old) and add it to every node's
     accepted CAs;
  2. make it the issuing CA on the control planes and write a new client
     config (client certificate from the new CA, both CAs trusted) in place
     of the one used here;
  3. re-issue every node's certificates from the new CA, then drop the old
     CA from every node and from the client config.
Client configs that trust only the old CA keep working until step 3.
The state of the rotation is kept in etcd: an interrupted rotation is
completed with --resume, or undone with --rollback until step 2 has run.
A member that does not answer stops the rotation, named. Nothing changes
unless --dry-run=false is given.

Until step 2 has run, the new CA's key is kept beside the client config in
a file of mode 0600 (CLIENTCONFIG.rotate-os-ca.pem); it is removed once the
control planes hold it. --secrets names the secrets bundle the cluster was
made from: when the rotation ends its OS CA becomes the new one (0600), so
that configs generated from it afterwards join the rotated cluster.

--ca etcd rotates the etcd CA (cluster.etcd.ca) the same way, on the control
planes only (workers hold no etcd CA and are skipped): 1. the new etcd CA is
accepted, 2. etcd's certificates are issued from it, 3. the old one is
dropped. Each change restarts the etcd members one at a time; each step is
verified on every control plane from what its running etcd member loaded.
The client config does not change. Its key is kept until step 2 as above
(CLIENTCONFIG.rotate-etcd-ca.pem, mode 0600); --secrets updates the bundle's
etcd CA. The two kinds are recorded apart and may be rotated independently.`,
		Example: `  aegisctl rotate-ca
  aegisctl rotate-ca --dry-run=false
  aegisctl rotate-ca --dry-run=false --until-step 2
  aegisctl rotate-ca --dry-run=false --resume
  aegisctl rotate-ca --ca etcd --dry-run=false`,
		Args: cobra.NoArgs,
	}

	fl := cmd.Flags()
	fl.StringVar(&f.kind, "ca", "os", "the CA to rotate: os or etcd")
	fl.BoolVar(&f.dryRun, "dry-run", true, "show what would be done, change nothing")
	fl.BoolVar(&f.resume, "resume", false, "complete the rotation in progress")
	fl.BoolVar(&f.rollback, "rollback", false, "undo the rotation in progress (before step 2)")
	fl.IntVar(&f.untilStep, "until-step", 0, "stop after this step (1 or 2), to resume later; 0 runs every step")
	fl.StringVar(&f.secrets, "secrets", "", "a secrets bundle whose OS CA the rotation replaces when it ends, so configs generated from it join the rotated cluster")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		kind, ok := caKinds()[f.kind]
		if !ok {
			return fmt.Errorf("--ca %q: want one of %s", f.kind, strings.Join(slices.Sorted(maps.Keys(caKinds())), ", "))
		}

		if f.untilStep < 0 || f.untilStep > rotationstate.StepDone {
			return fmt.Errorf("--until-step %d: want 1, 2, or 0 for every step", f.untilStep)
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			if len(s.nodes) > 0 {
				return fmt.Errorf("rotate-ca changes every member of the cluster through the endpoint; drop -n (%s)", strings.Join(s.nodes, ", "))
			}

			r := &rotator{e: e, s: s, kind: kind, out: e.stdout, flags: f, keyPath: s.path + ".rotate-" + kind.name() + "-ca.pem"}

			return r.run(ctx)
		})
	}

	return cmd
}

// rotator drives one run of rotate-ca.
type rotator struct {
	e       *env
	s       *session
	kind    caKind
	out     io.Writer
	flags   rotateFlags
	keyPath string

	members []member
	skipped int // members that do not hold the CA
	rec     *rotation.Rotation
	rev     int64
}

func (r *rotator) client() *client.Client { return r.s.client }

// run reads the cluster and the recorded rotation, decides, and runs the
// steps (or prints them, in a dry run).
func (r *rotator) run(ctx context.Context) error {
	if err := r.readRecord(ctx); err != nil {
		return err
	}

	action, first, err := decide(r.rec, r.flags.resume, r.flags.rollback)
	if err != nil {
		return err
	}

	if err = r.loadMembers(ctx); err != nil {
		return err
	}

	if err = r.checkReachable(ctx); err != nil {
		return err
	}

	if err = r.checkSecrets(ctx); err != nil {
		return err
	}

	steps := stepsToRun(first, int32(r.flags.untilStep))
	if r.flags.dryRun {
		return r.printPlan(ctx, action, steps)
	}

	switch action {
	case actionRollback:
		return r.timed(ctx, "rollback", r.rollback)
	case actionStart:
		err = r.start(ctx)
	case actionResume:
		err = r.timed(ctx, fmt.Sprintf("catching up with step %d", r.rec.GetStep()), r.catchUp)
	}

	if err != nil {
		return err
	}

	return r.runSteps(ctx, steps)
}

func (r *rotator) runSteps(ctx context.Context, steps []int32) error {
	run := map[int32]func(context.Context) error{rotationstate.StepAccepted: r.step1, rotationstate.StepIssuing: r.step2, rotationstate.StepDone: r.step3}

	for _, step := range steps {
		name := fmt.Sprintf("step %d (%s)", step, r.kind.stepName(step))
		err := r.timed(ctx, name, run[step])
		if err == nil {
			err = r.kind.verify(ctx, r, step)
		}

		if err != nil {
			return fmt.Errorf("%s: %w\nthe rotation stopped after step %d; run again with --resume once the cause is fixed", name, err, r.rec.GetStep())
		}

		if err := r.record(ctx, step); err != nil {
			return err
		}

		if step >= rotationstate.StepIssuing {
			if err := r.dropKeyFile(); err != nil {
				return err
			}
		}
	}

	if r.rec.GetStep() < rotationstate.StepDone {
		fmt.Fprintf(r.out, "stopped after step %d as asked; complete the rotation with 'aegisctl rotate-ca --dry-run=false --resume'\n", r.rec.GetStep())
	} else {
		fmt.Fprintf(r.out, "rotation of the %s CA done: only the new CA is accepted on the %d members\n", r.kind.name(), len(r.members))

		return r.updateSecrets(ctx)
	}

	return nil
}

// timed runs one phase and prints how long it took.
func (r *rotator) timed(ctx context.Context, name string, fn func(context.Context) error) error {
	fmt.Fprintf(r.out, "%s...\n", name)

	start := time.Now()
	if err := fn(ctx); err != nil {
		return err
	}

	fmt.Fprintf(r.out, "%s: done in %s\n", name, time.Since(start).Round(time.Millisecond))

	return nil
}

// printPlan says what a run would do.
func (r *rotator) printPlan(ctx context.Context, action rotationAction, steps []int32) error {
	cp, err := r.nodeConfig(ctx, r.members[0])
	if err != nil {
		return err
	}

	fmt.Fprintf(r.out, "Dry run: nothing changes (add --dry-run=false to rotate).\n%s CA in effect on %s: %s\nmembers (%d):\n",
		r.kind.name(), r.members[0], r.kind.issuing(cp).Subject, len(r.members))

	for _, m := range r.members {
		fmt.Fprintf(r.out, "  %s\n", m)
	}

	if action == actionRollback {
		fmt.Fprintf(r.out, "would roll back: drop the new CA %s from every member\n", r.recNew().Subject)

		return nil
	}

	for _, s := range steps {
		fmt.Fprintf(r.out, "would run step %d: %s\n", s, r.kind.stepName(s))
	}

	if r.skipped > 0 {
		fmt.Fprintf(r.out, "skipped: %d workers, which hold no %s CA\n", r.skipped, r.kind.name())
	}

	if slices.Contains(steps, rotationstate.StepDone) && r.kind.clientFollows() {
		fmt.Fprintln(r.out, "at step 3, client configs that trust only the old CA stop working")
	}

	return nil
}
