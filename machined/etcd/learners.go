package etcd

import (
	"context"
	"slices"

	"github.com/aegis-os/aegis/machined/system/runner"
)

// How control planes that boot together join one cluster. Each joins as a
// learner: added to the membership, started with the membership as it
// stands, and promoted once caught up (promote.go). Three checks of etcd
// shape the joins:
//
//   - It refuses a new member, a learner too, unless a quorum of the
//     voters it would then make has been connected to the member asked
//     for five seconds: once the second control plane is a voter, the
//     third cannot be added for five seconds. So the learners are added
//     together, as they find the cluster (up to maxLearners at once).
//   - A member started with an existing cluster asks every other member
//     for its version before it serves: a member whose server has bound
//     its peer port but is itself still asking answers nothing, and each
//     question waits out etcd's request timeout (7 s by default, twice).
//     Control planes started together asked each other and lost 14 s. So
//     the learners start one at a time, in the order they were added
//     (awaitEarlier), each finding the earlier ones serving and the later
//     ones not yet listening (refused at once).
//   - That member also compares its --initial-cluster with the membership
//     the running members hold and ends at once when they differ: a
//     learner added just after another was planned makes the earlier one's
//     start fail. Its runner then plans the start again at once
//     (memberRunner.Run) rather than after the restart policy's backoff.
//
// Quorum is never at stake: learners do not vote, and Raft applies one
// membership change at a time, each committed by a quorum of the voters
// before it, so a second learner is promoted only with the first promoted
// one answering.

// joinOrder is a joining member's ID and the learners added before it that
// had not started then.
type joinOrder struct {
	self    uint64
	earlier []uint64
}

// unstarted returns the IDs of the members of list, other than self, that
// have not started (etcd names a member once it has published itself).
func unstarted(list []member, self uint64) []uint64 {
	var out []uint64

	for _, m := range list {
		if m.id != self && m.name == "" {
			out = append(out, m.id)
		}
	}

	return out
}

// awaitEarlier waits, up to learnerWait, until none of the learners added
// before this one is still to start, and returns the start plan again with
// the membership of then. An earlier learner that never starts costs the
// wait and no more.
func (e *Etcd) awaitEarlier(ctx context.Context, plan startPlan, order joinOrder, notify runner.Notify) (startPlan, error) {
	if len(order.earlier) == 0 {
		return plan, nil
	}

	deadline := e.cfg.Clock.Now().Add(learnerWait)
	shown := false

	for {
		list, err := e.peerMembers(ctx)
		if err == nil {
			waiting := slices.ContainsFunc(unstarted(list, order.self), func(m uint64) bool { return slices.Contains(order.earlier, m) })
			if !waiting {
				if slices.ContainsFunc(list, func(m member) bool { return m.id == order.self }) {
					plan = joinPlan(list, order.self, e.cfg.Name)
				}

				return plan, nil
			}
		}

		if !e.cfg.Clock.Now().Before(deadline) {
			e.log.Warn("a control plane that joined before this one has not started its member; starting anyway")

			return plan, nil
		}

		if !shown {
			notify(false, "waiting for the control plane that joined before this one to start its member")
			shown = true
		}

		t := e.cfg.Clock.NewTimer(learnerPoll)

		select {
		case <-ctx.Done():
			t.Stop()

			return startPlan{}, ctx.Err()
		case <-t.C():
		}
	}
}
