package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
}

// started is a member asked to upgrade: when its turn began (the start of
// its delivery) and when its Upgrade call was accepted.
type started struct {
	Entry
	began, upgraded time.Time
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
		if err := u.cluster.Upgrade(ctx, e.Member, refs[i]); err != nil {
			failed = append(failed, failure{m: e.Member, what: "asking it to upgrade (MachineService.Upgrade)", err: err,
				touched: !errors.Is(err, ErrNotStarted)})

			break
		}

		u.w.Printf("  %s: upgrading from %s\n", e, e.From)
		going = append(going, started{Entry: e, began: began[i], upgraded: u.w.Clock().Now()})
	}

	return append(failed, u.wait(ctx, going)...)
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
// and is healthy, or its node timeout has passed since its Upgrade call.
func (u *Upgrade) wait(ctx context.Context, going []started) []failure {
	last := map[string]string{}

	var failed []failure

	for {
		going = slices.DeleteFunc(going, func(s started) bool {
			why := u.check(ctx, s.Member)
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

// check is why m is not done yet, or nothing when it runs the target and
// is healthy.
func (u *Upgrade) check(ctx context.Context, m rollout.Member) string {
	v, err := u.cluster.Version(ctx, m)

	switch {
	case err != nil:
		return "not answering (it restarts during its upgrade): " + oneLine(err)
	case v != u.plan.Target:
		return "runs " + v
	}

	if err = u.cluster.Healthy(ctx, m); err != nil {
		return "runs " + v + ", not healthy yet: " + oneLine(err)
	}

	return ""
}

// stopped is the error of a run stopped by failed: each member that
// failed and why, who is upgraded and who is not, and how to go on.
func (u *Upgrade) stopped(failed []failure) error {
	var b strings.Builder

	touched := ""

	for _, f := range failed {
		fmt.Fprintf(&b, "upgrade stopped at %s, %s: %s\n", f.m, f.what, oneLine(f.err))

		if f.touched && touched == "" {
			touched = f.m.Addr
		}
	}

	fmt.Fprintf(&b, "upgraded to %s: %s\n", u.plan.Target, listOrNone(u.upgraded))
	fmt.Fprintf(&b, "not touched: %s\n", listOrNone(u.untouched(failed)))

	if touched != "" {
		fmt.Fprintf(&b, "A member that is not healthy in time after its upgrade rolls back by itself to the version it kept: "+
			"check what it runs ('aegisctl -n %s version') and its services ('aegisctl -n %[1]s services'), "+
			"roll it back (MachineService.Rollback) if it is stuck, fix the cause, then ", touched)
	} else {
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
