// Package statictoken rotates the machine config's static trustd token
// (machine.token) on every member of the cluster, on the rollout engine:
// 1. every control plane takes the new token, the old one accepted as a
// previous token until the overlap ends; 2. every worker takes the new
// token; 3. the control planes drop the previous tokens. Each member is
// checked after its change (its config, and on control planes what its
// trustd accepts); a member that fails stops the rotation before the next
// step, and the rotation run again with the same token goes on from where
// each member is.
package statictoken

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/token"
)

// Options are a rotation's: the walker's and the rotation's own.
type Options struct {
	rollout.Options
	// Token is the new token. Required.
	Token token.Token
	// Generated: Token was generated for this run, and is shown once when
	// step 1 starts. false: the caller gave it.
	Generated bool
	// Expires is when the old token stops being accepted (the overlap's
	// end). Required.
	Expires time.Time
	// KeepOverlap skips step 3: the old token is refused only once the
	// overlap ends. false: step 3 runs.
	KeepOverlap bool
	// Bundle, when not nil, is a secrets bundle whose trustdinfo.token
	// becomes the new token once step 1 is done, saved to Secrets (mode
	// 0600). nil: no bundle is written.
	Bundle  *certs.Bundle
	Secrets string
	// TrustdCAs are the CAs (PEM) the control planes' trustd is verified
	// against when it is probed: the client config's. Required.
	TrustdCAs []byte
	// TrustdWait bounds the wait for a control plane's trustd to follow
	// its applied config. Zero: DefaultTrustdWait.
	TrustdWait time.Duration
	// ProbeInterval spaces the probes of trustd while it has not followed
	// yet. Zero: DefaultProbeInterval.
	ProbeInterval time.Duration
}

// Rotation is one run of the static token's rotation: the new token, the
// end of the overlap, and the members with the config each had.
type Rotation struct {
	opts      Options
	w         *rollout.Walker
	trustdCAs *ca.AcceptedSet

	members  []*Node
	unlisted []string
}

// Prepare lists the members, control planes first, and reads each one's
// config: a member that does not answer is kept, with its error, which
// the plan shows and the steps name.
func Prepare(ctx context.Context, opts Options) (*Rotation, error) {
	if opts.TrustdWait <= 0 {
		opts.TrustdWait = DefaultTrustdWait
	}

	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}

	r := &Rotation{opts: opts, w: rollout.New(opts.Options)}
	if err := r.loadMembers(ctx); err != nil {
		return nil, err
	}

	return r, nil
}

// Members are the members as the rotation found them, in the order it
// changes them.
func (r *Rotation) Members() []*Node { return r.members }

// Unlisted are the control-plane endpoints no member is: a rotation
// refuses to start while there is one.
func (r *Rotation) Unlisted() []string { return r.unlisted }

// Run carries the rotation through its steps, each checked on every
// member before the next; never in a dry run.
func (r *Rotation) Run(ctx context.Context) error {
	if r.w.DryRun() {
		return rollout.ErrDryRun
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

	return r.stepDropOld(ctx, old)
}

// stepControlPlanes is step 1. The new token is shown once every control
// plane accepts it, and written to the bundle then: new nodes may join
// with it from that moment.
func (r *Rotation) stepControlPlanes(ctx context.Context) error {
	start := r.w.Clock().Now()
	r.w.Printf("\nStep 1: control planes accept the new token\n")

	if r.opts.Generated {
		r.w.Printf("  the new token (keep it; it is not shown again): %s\n", r.opts.Token.Reveal())
	}

	if failed := r.each(ctx, true, r.acceptOnControlPlane); len(failed) > 0 {
		return fmt.Errorf("stopped in step 1: %s failed it (above); the other control planes accept both "+
			"tokens, and no worker was changed: fix them and %s",
			strings.Join(failed, ", "), r.resumeHint())
	}

	r.reportStep(1, start)

	if r.opts.Bundle != nil {
		r.opts.Bundle.TrustdInfo.Token = r.opts.Token.Reveal()
		if err := r.opts.Bundle.Save(r.opts.Secrets, true); err != nil {
			return fmt.Errorf("step 1 done, but the secrets bundle was not rewritten: %w", err)
		}

		r.w.Printf("Secrets bundle %s: trustdinfo.token is now the new token.\n", r.opts.Secrets)
	}

	return nil
}

// stepWorkers is step 2.
func (r *Rotation) stepWorkers(ctx context.Context) error {
	start := r.w.Clock().Now()
	r.w.Printf("\nStep 2: workers take the new token\n")

	if failed := r.each(ctx, false, r.updateWorker); len(failed) > 0 {
		return r.stoppedBeforeDrop(failed)
	}

	r.reportStep(2, start)

	return nil
}

// stepDropOld is step 3.
func (r *Rotation) stepDropOld(ctx context.Context, old []token.Token) error {
	if r.opts.KeepOverlap {
		r.w.Printf("\nStep 3 skipped (--keep-overlap): the old token stays accepted until %s.\n",
			r.opts.Expires.Format(time.RFC3339))

		return nil
	}

	if err := r.catchUp(ctx); err != nil {
		return err
	}

	start := r.w.Clock().Now()
	r.w.Printf("\nStep 3: control planes drop the old token\n")

	drop := func(ctx context.Context, m *Node) error { return r.dropOnControlPlane(ctx, m, old) }
	if failed := r.each(ctx, true, drop); len(failed) > 0 {
		return fmt.Errorf("step 3 incomplete: %s still accept the old token (until %s at the latest): %s",
			strings.Join(failed, ", "), r.opts.Expires.Format(time.RFC3339), r.resumeHint())
	}

	r.reportStep(3, start)

	return nil
}

// catchUp lists the members again before step 3: a node that joined
// since the rotation started, with the old token, must take the new one
// before the old one goes (steps 1 and 2 for it alone).
func (r *Rotation) catchUp(ctx context.Context) error {
	joined, err := r.listMembers(ctx, r.members)
	if err != nil {
		return fmt.Errorf("stopped before step 3: %w", err)
	}

	if len(joined) == 0 {
		return nil
	}

	r.w.Printf("\nMembers listed since the rotation started:\n")

	var failed []string

	for _, m := range joined {
		err := m.Err

		switch {
		case err != nil:
		case m.ControlPlane():
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
func (r *Rotation) each(ctx context.Context, controlPlanes bool, fn func(context.Context, *Node) error) []string {
	var failed []string

	for _, m := range r.members {
		if m.ControlPlane() != controlPlanes {
			continue
		}

		err := m.Err
		if err == nil {
			err = fn(ctx, m)
		}

		failed = r.report(m, err, failed)
	}

	return failed
}
