package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout/carotation"
	"github.com/aegis-os/aegis/rollout/etcdca"
	"github.com/aegis-os/aegis/rollout/osca"
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
A member that does not answer stops the rotation, named, and so does a node
that holds a live certificate of the cluster but is not in the member list
(see 'aegisctl members certified'; 'aegisctl members remove' takes out a
worker that is gone for good), dry run included. Nothing changes unless
--dry-run=false is given.

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

			return rotateCA(ctx, s, f, kind)
		})
	}

	return cmd
}

// caKinds returns the kinds --ca takes, by name.
func caKinds() map[string]carotation.Kind {
	return map[string]carotation.Kind{"os": osca.Kind(), "etcd": etcdca.Kind()}
}

// rotateCA prepares the rotation, then prints its plan or runs it.
func rotateCA(ctx context.Context, s *session, f rotateFlags, kind carotation.Kind) error {
	if f.secrets != "" {
		s.e.warnShared(f.secrets, "secrets bundle")
	}

	r, err := carotation.Prepare(ctx, carotation.Options{
		Options: s.rolloutOptions(f.dryRun),
		Kind:    kind, Resume: f.resume, Rollback: f.rollback, UntilStep: int32(f.untilStep),
		KeyPath: s.path + ".rotate-" + kind.Name + "-ca.pem",
		Secrets: f.secrets, ClientConfig: s.path, ClientCert: s.cert, SwitchClient: s.switchCredentials,
	})
	if err != nil {
		return err
	}

	if !f.dryRun {
		return r.Run(ctx)
	}

	p, err := r.Plan(ctx)
	if err != nil {
		return err
	}

	printRotationPlan(s.e.stdout, p)

	return nil
}

// printRotationPlan says what a run would do.
func printRotationPlan(w io.Writer, p *carotation.Plan) {
	fmt.Fprintf(w, "Dry run: nothing changes (add --dry-run=false to rotate).\n%s CA in effect on %s: %s\nmembers (%d):\n",
		p.Kind, p.Members[0], p.InEffect, len(p.Members))

	for _, m := range p.Members {
		fmt.Fprintf(w, "  %s\n", m)
	}

	if p.Action == carotation.Rollback {
		fmt.Fprintf(w, "would roll back: drop the new CA %s from every member\n", p.NewCA)

		return
	}

	for _, s := range p.Steps {
		fmt.Fprintf(w, "would run step %d: %s\n", s.N, s.Name)
	}

	if p.Skipped > 0 {
		fmt.Fprintf(w, "skipped: %d workers, which hold no %s CA\n", p.Skipped, p.Kind)
	}

	if p.ClientStops {
		fmt.Fprintln(w, "at step 3, client configs that trust only the old CA stop working")
	}
}
