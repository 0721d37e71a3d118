package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/rollout"
)

// failure is how one member failed a batch.
type failure struct {
	m rollout.Member
	// what failed, as "while …" reads it.
	what string
	err  error
	// touched: the member was asked to upgrade, and may run either version.
	touched bool
	// wentBack: the member reported going back to the version it kept,
	// and runs that one.
	wentBack bool
}

// started is a member asked to upgrade: when its turn began (the start of
// its delivery) and when its Upgrade call was accepted, and the last
// rollback it reported before that call (watched: it reported one, or
// none; a member that does not serve its upgrade status is not watched).
type started struct {
	Entry
	began, upgraded time.Time

	before  resourcetypes.UpgradeRollback
	watched bool
}

// runBatch upgrades one batch: every member checked healthy (for a control
// plane, every control plane, so that none goes down while etcd could
// lose quorum), given the bundle, asked to upgrade, then waited on. A
// failure before the Upgrade calls touches no member of the batch; one
// among them stops the calls, and those already made are waited on.
func (u *Upgrade) runBatch(ctx context.Context, batch []Entry) []failure {
	if f := u.precheck(ctx, batch); len(f) > 0 {
		return f
	}

	refs := make([]string, len(batch))
	began := make([]time.Time, len(batch))

	for i, e := range batch {
		began[i] = u.w.Clock().Now()

		ref, err := u.deliver(ctx, e)
		if err != nil {
			return []failure{{m: e.Member, what: "delivering the bundle to it", err: err}}
		}

		refs[i] = ref
		u.w.Printf("  %s: bundle delivered in %s\n", e, u.since(began[i]))
	}

	var (
		going  []started
		failed []failure
	)

	for i, e := range batch {
		s, err := u.ask(ctx, e, began[i], refs[i])
		if err != nil {
			failed = append(failed, failure{m: e.Member, what: "asking it to upgrade (MachineService.Upgrade)", err: err,
				touched: !errors.Is(err, ErrNotStarted)})

			break
		}

		going = append(going, s)
	}

	return append(failed, u.wait(ctx, going)...)
}

// ask asks e to upgrade to ref, having read the last rollback it reports,
// so that the wait tells a rollback of this upgrade from an older one.
func (u *Upgrade) ask(ctx context.Context, e Entry, began time.Time, ref string) (started, error) {
	before, err := u.cluster.LastRollback(ctx, e.Member)
	s := started{Entry: e, began: began, before: before, watched: err == nil}

	if err = u.cluster.Upgrade(ctx, e.Member, ref); err != nil {
		return s, err
	}

	u.w.Printf("  %s: upgrading from %s\n", e, e.From)
	s.upgraded = u.w.Clock().Now()

	return s, nil
}

// deliver gives e the bundle, bounded by the node timeout.
func (u *Upgrade) deliver(ctx context.Context, e Entry) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, u.opts.NodeTimeout)
	defer cancel()

	return u.cluster.Deliver(ctx, e.Member, u.plan.Bundle)
}

// precheck checks that the members a batch takes down are healthy before
// they go, and, for a control plane, that every other control plane is
// too: an upgrade must not start on a cluster already short of a member.
func (u *Upgrade) precheck(ctx context.Context, batch []Entry) []failure {
	check := batch

	if batch[0].ControlPlane() {
		check = nil

		for _, e := range u.plan.Entries {
			if e.ControlPlane() {
				check = append(check, e)
			}
		}
	}

	for _, e := range check {
		if err := u.cluster.Healthy(ctx, e.Member); err != nil {
			what := "checking it is healthy before its upgrade"
			if !slices.ContainsFunc(batch, func(b Entry) bool { return b.Addr == e.Addr }) {
				what = fmt.Sprintf("checking it is healthy before %s goes down (etcd must keep its quorum)", batch[0])
			}

			return []failure{{m: e.Member, what: what, err: err}}
		}
	}

	return nil
}

// wait checks the members asked to upgrade until each reports the target
// and is healthy, reports that it went back to the version it kept, or its
// node timeout has passed since its Upgrade call.
func (u *Upgrade) wait(ctx context.Context, going []started) []failure {
	last := map[string]string{}

	var failed []failure

	for {
		going = slices.DeleteFunc(going, func(s started) bool {
			why, back := u.check(ctx, s)
			if back != nil {
				u.w.Printf("  %s: %s, %s after its upgrade began\n", s.Entry, back, u.since(s.began))
				failed = append(failed, failure{m: s.Member, what: "waiting for it", touched: true, wentBack: true, err: back})

				return true
			}

			if why == "" {
				u.upgraded = append(u.upgraded, s.Entry)
				u.w.Printf("  %s: runs %s and is healthy, %s in all\n", s.Entry, u.plan.Target, u.since(s.began))

				return true
			}

			if last[s.Addr] != why {
				u.w.Printf("  %s: waiting: %s\n", s.Entry, why)
				last[s.Addr] = why
			}

			if u.w.Clock().Now().Sub(s.upgraded) < u.opts.NodeTimeout {
				return false
			}

			failed = append(failed, failure{m: s.Member, what: "waiting for it", touched: true,
				err: fmt.Errorf("it did not run %s and pass its health check within %s (last: %s)", u.plan.Target, u.opts.NodeTimeout, why)})

			return true
		})

		if len(going) == 0 {
			return failed
		}

		if !clock.Sleep(ctx, u.w.Clock(), u.opts.Interval) {
			for _, s := range going {
				failed = append(failed, failure{m: s.Member, what: "waiting for it", err: ctx.Err(), touched: true})
			}

			return failed
		}
	}
}

// check is why s is not done yet, or nothing when it runs the target and
// is healthy; back is set when s went back to the version it kept.
func (u *Upgrade) check(ctx context.Context, s started) (why string, back error) {
	v, err := u.cluster.Version(ctx, s.Member)

	switch {
	case err != nil:
		return "not answering (it restarts during its upgrade): " + oneLine(err), nil
	case v != u.plan.Target:
		return "runs " + v, u.wentBack(ctx, s)
	}

	if err = u.cluster.Healthy(ctx, s.Member); err != nil {
		return "runs " + v + ", not healthy yet: " + oneLine(err), nil
	}

	return "", nil
}

// wentBack is an error naming the version s went back to and why, when s
// reports a rollback other than the one it reported before its Upgrade
// call: a member back on the version it kept does not try the target
// again by itself, and waiting for it would only wait out the timeout.
// A member not watched, or whose status cannot be read now, is nil.
func (u *Upgrade) wentBack(ctx context.Context, s started) error {
	if !s.watched {
		return nil
	}

	r, err := u.cluster.LastRollback(ctx, s.Member)
	if err != nil || r.IsZero() || sameRollback(r, s.before) {
		return nil
	}

	how := "by itself"
	if !r.ByNode {
		how = "on a Rollback asked through the API"
	}

	return fmt.Errorf("it went back to %s %s at %s: %s", r.To, how, r.At.UTC().Format(time.RFC3339), r.Reason)
}

// sameRollback reports whether a and b record one rollback.
func sameRollback(a, b resourcetypes.UpgradeRollback) bool {
	a.At, b.At = a.At.UTC(), b.At.UTC()

	return a == b
}

// stopped is the error of a run stopped by failed: each member that
// failed and why, who is upgraded and who is not, and how to go on.
func (u *Upgrade) stopped(failed []failure) error {
	var b strings.Builder

	touched, back := "", ""

	for _, f := range failed {
		fmt.Fprintf(&b, "upgrade stopped at %s, %s: %s\n", f.m, f.what, oneLine(f.err))

		switch {
		case f.wentBack && back == "":
			back = f.m.Addr
		case f.touched && !f.wentBack && touched == "":
			touched = f.m.Addr
		}
	}

	fmt.Fprintf(&b, "upgraded to %s: %s\n", u.plan.Target, listOrNone(u.upgraded))
	fmt.Fprintf(&b, "not touched: %s\n", listOrNone(u.untouched(failed)))

	switch {
	case touched != "":
		fmt.Fprintf(&b, "A member that is not healthy in time after its upgrade rolls back by itself to the version it kept: "+
			"check what it runs ('aegisctl -n %s version') and its services ('aegisctl -n %[1]s services'), "+
			"roll it back (MachineService.Rollback) if it is stuck, fix the cause, then ", touched)
	case back != "":
		fmt.Fprintf(&b, "It runs the version it kept again ('aegisctl -n %s get upgrade' shows its versions and the rollback): "+
			"fix the cause it gives (in the release, or on the node), then ", back)
	default:
		fmt.Fprintf(&b, "Nothing changed on it: fix the cause, then ")
	}

	fmt.Fprintf(&b, "run the same upgrade again: members already on %s are skipped, so it goes on from here.", u.plan.Target)

	return errors.New(strings.TrimSuffix(b.String(), "\n"))
}

// untouched are the members the run was to upgrade but did not ask to:
// neither upgraded nor failed once touched.
func (u *Upgrade) untouched(failed []failure) []Entry {
	var out []Entry

	for _, e := range u.plan.Entries {
		done := slices.ContainsFunc(u.upgraded, func(d Entry) bool { return d.Addr == e.Addr })
		hit := slices.ContainsFunc(failed, func(f failure) bool { return f.touched && f.m.Addr == e.Addr })

		if !e.Skipped() && !done && !hit {
			out = append(out, e)
		}
	}

	return out
}

func listOrNone(entries []Entry) string {
	if len(entries) == 0 {
		return "none"
	}

	return names(entries)
}
