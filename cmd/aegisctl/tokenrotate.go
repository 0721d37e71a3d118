package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout/statictoken"
	"github.com/aegis-os/aegis/token"
)

// rotateStaticFlags are the flags of token rotate-static.
type rotateStaticFlags struct {
	token       string
	overlap     time.Duration
	keepOverlap bool
	dryRun      bool
	secrets     string
}

// rotateStaticLong is the help of token rotate-static.
const rotateStaticLong = `Rotate the machine config's static trustd token (machine.token) on every
member of the cluster, as the endpoint's membership list names them, over
the API (ApplyConfiguration, no reboot):
  1. every control plane: the new token becomes machine.token and the old
     one goes to machine.previousTokens, accepted until the overlap ends
     (--overlap); checked on each: its config, and its trustd accepting the
     new token;
  2. every worker: machine.token becomes the new token; checked on each;
  3. every control plane: the previous tokens are dropped, and its trustd
     is checked to refuse the old token (with --keep-overlap they stay,
     accepted until the overlap ends).
A control plane that cannot be reached or does not take the token stops the
rotation before step 2; a worker likewise stops it before step 3, so no
worker is left on a token trustd refuses. Run the command again with
--token set to the same new token to go on once the node is back. The
nodes named with -n (or the context's) play no part: every member is
rotated. A node that holds a live certificate of the cluster but is not in
the member list stops the rotation before anything changes, named (see
'aegisctl members certified'; 'aegisctl members remove' takes out a worker
that is gone for good).

Nothing changes unless --dry-run=false: the dry run prints the members and
the plan. The new token is generated unless --token gives it, and printed
when step 1 starts. The secrets bundle's token (trustdinfo.token) is the
old one after a rotation: --secrets FILE rewrites it, else make configs for
new nodes with the new token.`

func newTokenRotateStaticCommand(e *env) *cobra.Command {
	var flags rotateStaticFlags

	cmd := &cobra.Command{
		Use:   "rotate-static",
		Short: "Replace the static token of every node, old and new accepted during an overlap (admin only)",
		Long:  rotateStaticLong,
		Example: `  aegisctl token rotate-static                       # the plan, changes nothing
  aegisctl token rotate-static --dry-run=false --secrets secrets.yaml
  aegisctl token rotate-static --dry-run=false --token abcdef.0123456789abcdef --overlap 30m`,
		Args: cobra.NoArgs,
	}

	f := cmd.Flags()
	f.StringVar(&flags.token, "token", "", "the new token ([a-z0-9]{6}.[a-z0-9]{16}); default: generated")
	f.DurationVar(&flags.overlap, "overlap", time.Hour, "how long the old token stays accepted after step 1")
	f.BoolVar(&flags.keepOverlap, "keep-overlap", false, "skip step 3: the old token is refused only once the overlap ends")
	f.BoolVar(&flags.dryRun, "dry-run", true, "print the plan and the members, change nothing")
	f.StringVar(&flags.secrets, "secrets", "", "secrets bundle whose trustdinfo.token is rewritten with the new token")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r, err := newStaticRotation(e, flags)
		if err != nil {
			return err
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			r.Options = s.rolloutOptions(flags.dryRun)
			r.TrustdCAs = s.ctx.CA

			return runStaticRotation(ctx, e, r)
		})
	}

	return cmd
}

// newStaticRotation checks the flags and the secrets bundle before
// anything is dialed, and makes the rotation's options of them.
func newStaticRotation(e *env, flags rotateStaticFlags) (*statictoken.Options, error) {
	if flags.overlap < statictoken.MinOverlap || flags.overlap > certs.MaxPreviousTokenLife {
		return nil, fmt.Errorf("--overlap %s: want between %s and %s", flags.overlap, statictoken.MinOverlap, certs.MaxPreviousTokenLife)
	}

	now := e.clock.Now()
	r := &statictoken.Options{
		Expires: now.Add(flags.overlap).UTC().Truncate(time.Second), KeepOverlap: flags.keepOverlap, Secrets: flags.secrets,
	}

	var err error

	if flags.token != "" {
		if r.Token, err = token.Parse(flags.token); err != nil {
			return nil, fmt.Errorf("--token: %w", err)
		}
	} else {
		if r.Token, err = token.Generate(rand.Reader); err != nil {
			return nil, err
		}

		r.Generated = true
	}

	if flags.secrets != "" {
		e.warnShared(flags.secrets, "secrets bundle")

		if r.Bundle, err = certs.LoadBundle(flags.secrets, now); err != nil {
			return nil, fmt.Errorf("--secrets: %w", err)
		}
	}

	return r, nil
}

// runStaticRotation lists the members, prints the plan, and runs the
// rotation unless it is a dry run.
func runStaticRotation(ctx context.Context, e *env, opts *statictoken.Options) error {
	r, err := statictoken.Prepare(ctx, *opts)
	if err != nil {
		return err
	}

	printStaticPlan(e.stdout, opts, r)

	if opts.DryRun {
		fmt.Fprintln(e.stdout, "\nDry run: nothing changed. Run again with --dry-run=false to rotate.")

		return nil
	}

	if err = r.Run(ctx); err != nil {
		return err
	}

	printBundleNote(e.stdout, opts)

	return nil
}
