package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
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
rotated.

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
			r.s = s

			return r.run(ctx)
		})
	}

	return cmd
}

// staticRotation is one run of token rotate-static: the new token, the
// end of the overlap, and the members with the config each had.
type staticRotation struct {
	e     *env
	s     *session
	flags rotateStaticFlags

	fresh     token.Token
	generated bool
	expires   time.Time
	bundle    *certs.Bundle
	trustdCAs *ca.AcceptedSet // what the probes of trustd verify it against

	members  []*rotationMember
	unlisted []string // control-plane endpoints no member is
}

// newStaticRotation checks the flags and the secrets bundle before
// anything is dialed.
func newStaticRotation(e *env, flags rotateStaticFlags) (*staticRotation, error) {
	if flags.overlap < minRotationOverlap || flags.overlap > certs.MaxPreviousTokenLife {
		return nil, fmt.Errorf("--overlap %s: want between %s and %s", flags.overlap, minRotationOverlap, certs.MaxPreviousTokenLife)
	}

	now := e.clock.Now()
	r := &staticRotation{e: e, flags: flags, expires: now.Add(flags.overlap).UTC().Truncate(time.Second)}

	var err error

	if flags.token != "" {
		if r.fresh, err = token.Parse(flags.token); err != nil {
			return nil, fmt.Errorf("--token: %w", err)
		}
	} else {
		if r.fresh, err = token.Generate(rand.Reader); err != nil {
			return nil, err
		}

		r.generated = true
	}

	if flags.secrets != "" {
		if r.bundle, err = certs.LoadBundle(flags.secrets, now); err != nil {
			return nil, fmt.Errorf("--secrets: %w", err)
		}
	}

	return r, nil
}

// run carries the rotation through its steps, each checked on every
// member before the next.
func (r *staticRotation) run(ctx context.Context) error {
	if err := r.loadMembers(ctx); err != nil {
		return err
	}

	r.printPlan()

	if r.flags.dryRun {
		fmt.Fprintln(r.e.stdout, "\nDry run: nothing changed. Run again with --dry-run=false to rotate.")

		return nil
	}

	if len(r.unlisted) > 0 {
		return fmt.Errorf("nothing changed: the control-plane endpoints %s are no member of the membership list, so their "+
			"trustd would not be given the new token; wait until they are listed (aegisctl get members)",
			strings.Join(r.unlisted, ", "))
	}

	old := r.oldTokens()

	if err := r.stepControlPlanes(ctx); err != nil {
		return err
	}

	if err := r.stepWorkers(ctx); err != nil {
		return err
	}

	if err := r.stepDropOld(ctx, old); err != nil {
		return err
	}

	r.printBundleNote()

	return nil
}

// oldTokens are the tokens the members hold other than the new one: what
// step 3 checks trustd refuses.
func (r *staticRotation) oldTokens() []token.Token {
	var out []token.Token

	add := func(t token.Token) {
		if t.IsZero() || t.Equal(r.fresh) {
			return
		}

		for _, o := range out {
			if o.Equal(t) {
				return
			}
		}

		out = append(out, t)
	}

	for _, m := range r.members {
		if m.err != nil {
			continue
		}

		add(m.cfg.TrustdToken())

		for _, p := range m.cfg.PreviousTrustdTokens() {
			add(p.Token)
		}
	}

	return out
}

// stepControlPlanes is step 1. The new token is shown once every control
// plane accepts it, and written to the bundle then: new nodes may join
// with it from that moment.
func (r *staticRotation) stepControlPlanes(ctx context.Context) error {
	start := r.e.clock.Now()
	fmt.Fprintln(r.e.stdout, "\nStep 1: control planes accept the new token")

	if r.generated {
		fmt.Fprintf(r.e.stdout, "  the new token (keep it; it is not shown again): %s\n", r.fresh.Reveal())
	}

	if failed := r.each(ctx, true, r.acceptOnControlPlane); len(failed) > 0 {
		return fmt.Errorf("stopped in step 1: %s failed it (above); the other control planes accept both "+
			"tokens, and no worker was changed: fix them and %s",
			strings.Join(failed, ", "), r.resumeHint())
	}

	r.reportStep(1, start)

	if r.bundle != nil {
		r.bundle.TrustdInfo.Token = r.fresh.Reveal()
		if err := r.bundle.Save(r.flags.secrets, true); err != nil {
			return fmt.Errorf("step 1 done, but the secrets bundle was not rewritten: %w", err)
		}

		fmt.Fprintf(r.e.stdout, "Secrets bundle %s: trustdinfo.token is now the new token.\n", r.flags.secrets)
	}

	return nil
}

// stepWorkers is step 2.
func (r *staticRotation) stepWorkers(ctx context.Context) error {
	start := r.e.clock.Now()
	fmt.Fprintln(r.e.stdout, "\nStep 2: workers take the new token")

	if failed := r.each(ctx, false, r.updateWorker); len(failed) > 0 {
		return r.stoppedBeforeDrop(failed)
	}

	r.reportStep(2, start)

	return nil
}

// stepDropOld is step 3.
func (r *staticRotation) stepDropOld(ctx context.Context, old []token.Token) error {
	if r.flags.keepOverlap {
		fmt.Fprintf(r.e.stdout, "\nStep 3 skipped (--keep-overlap): the old token stays accepted until %s.\n",
			r.expires.Format(time.RFC3339))

		return nil
	}

	if err := r.catchUp(ctx); err != nil {
		return err
	}

	start := r.e.clock.Now()
	fmt.Fprintln(r.e.stdout, "\nStep 3: control planes drop the old token")

	drop := func(ctx context.Context, m *rotationMember) error { return r.dropOnControlPlane(ctx, m, old) }
	if failed := r.each(ctx, true, drop); len(failed) > 0 {
		return fmt.Errorf("step 3 incomplete: %s still accept the old token (until %s at the latest): %s",
			strings.Join(failed, ", "), r.expires.Format(time.RFC3339), r.resumeHint())
	}

	r.reportStep(3, start)

	return nil
}

// catchUp lists the members again before step 3: a node that joined
// since the rotation started, with the old token, must take the new one
// before the old one goes (steps 1 and 2 for it alone).
func (r *staticRotation) catchUp(ctx context.Context) error {
	joined, err := r.listMembers(ctx, r.members)
	if err != nil {
		return fmt.Errorf("stopped before step 3: %w", err)
	}

	if len(joined) == 0 {
		return nil
	}

	fmt.Fprintln(r.e.stdout, "\nMembers listed since the rotation started:")

	var failed []string

	for _, m := range joined {
		err := m.err

		switch {
		case err != nil:
		case m.controlPlane():
			err = r.acceptOnControlPlane(ctx, m)
		default:
			err = r.updateWorker(ctx, m)
		}

		failed = r.report(m, err, failed)
	}

	r.members = append(r.members, joined...)

	if len(failed) > 0 {
		return r.stoppedBeforeDrop(failed)
	}

	return nil
}

// each runs fn on every member of the kind, in order, and names those it
// failed on (a member that could not be read at the start included).
func (r *staticRotation) each(ctx context.Context, controlPlanes bool, fn func(context.Context, *rotationMember) error) []string {
	var failed []string

	for _, m := range r.members {
		if m.controlPlane() != controlPlanes {
			continue
		}

		err := m.err
		if err == nil {
			err = fn(ctx, m)
		}

		failed = r.report(m, err, failed)
	}

	return failed
}
