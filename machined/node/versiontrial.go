package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/runner"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// leaseTimeout bounds the etcd calls of the upgrade lease and the quorum
// check, as etcdStatusTimeout bounds a status read: a cluster without
// quorum refuses the upgrade rather than hold the call.
const leaseTimeout = 10 * time.Second

// uploads is the node's store of uploaded bundles.
func (n *Node) uploads() upgrade.Uploads { return upgrade.Uploads{Dir: n.layout.UploadDir()} }

// mayGo refuses a control plane's switch when etcd would lose quorum
// without it, or when another control plane holds the upgrade lease; it
// takes the lease otherwise. A worker, or a control plane whose etcd does
// not run yet, may always go.
func (n *Node) mayGo(ctx context.Context) error {
	e := n.etcd.member()
	if e == nil {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()

	health, err := e.Health(ctx)
	if err != nil {
		return fmt.Errorf("%w: the members cannot be listed: %v", upgrade.ErrQuorum, err)
	}

	var members []upgrade.Member

	for _, h := range health {
		if !h.Learner {
			members = append(members, upgrade.Member{Name: h.Name, Healthy: h.Err == nil})
		}
	}

	self := hostname(n.config.current())
	if err := upgrade.CheckQuorum(members, self); err != nil {
		return err
	}

	cli, err := e.Client()
	if err != nil {
		return fmt.Errorf("%w: %v", upgrade.ErrQuorum, err)
	}

	return upgrade.AcquireLease(ctx, cli, self, upgrade.LeaseTTL)
}

// releaseLease gives the upgrade lease back once this control plane's new
// version is confirmed; a failure is logged, and the lease expires anyway.
func (n *Node) releaseLease(ctx context.Context) {
	e := n.etcd.member()
	if e == nil {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()

	cli, err := e.Client()
	if err == nil {
		err = upgrade.ReleaseLease(ctx, cli, hostname(n.config.current()))
	}

	if err != nil {
		n.log.Warn("upgrade lease not released; it expires by itself", slog.String(logkey.Error, err.Error()))
	}
}

// watchTrial ends the trial of the version this machined runs: confirmed
// when the node is first ready (all its services up, etcd healthy on a
// control plane, apid serving), rolled back at the deadline otherwise.
// It returns at once on a node with no trial.
func (n *Node) watchTrial(ctx context.Context) {
	s, ok, err := n.slots().Load()
	if err != nil || !ok || s.Trial == nil {
		return
	}

	deadline := n.clock.NewTimer(s.Trial.Deadline.Sub(n.clock.Now()))
	defer deadline.Stop()

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	looping := make(chan string, 1)

	go n.watchCrashLoop(wctx, s.Active.Version, looping)

	select {
	case <-n.status.ready:
		n.finishTrial(ctx, true, "")
	case <-deadline.C():
		n.finishTrial(ctx, false, "")
	case reason := <-looping:
		n.finishTrial(ctx, false, reason)
	case <-ctx.Done():
	}
}

// watchCrashLoop reads the service events of this machined from its
// first, and sends the reason to go back once a service of the version
// on trial exited upgrade.CrashLoopExits times in a row without coming up.
func (n *Node) watchCrashLoop(ctx context.Context, version string, looping chan<- string) {
	var loop upgrade.CrashLoop

	sub := n.bus.Subscribe(1)

	for {
		ev, err := sub.Next(ctx)
		if ctx.Err() != nil {
			return
		}

		st, ok := ev.Payload.(*machine.ServiceStateEvent)
		if err != nil || !ok {
			continue // a lagged reader goes on from the oldest event held
		}

		switch {
		case st.GetAction() == machine.ServiceStateEvent_RUNNING && (st.GetHealth() == nil || st.GetHealth().GetHealthy()):
			loop.Up(st.GetService())
		case st.GetAction() == machine.ServiceStateEvent_WAITING && strings.Contains(st.GetMessage(), runner.Restarting):
			if reason := loop.Exited(version, st.GetService(), st.GetMessage()); reason != "" {
				looping <- reason

				return
			}
		}
	}
}

// finishTrial confirms the trial (healthy), or ends it for reason (a
// service that cannot start), or lets it expire, as recorded in the slots
// now: an upgrade or rollback may have come first.
func (n *Node) finishTrial(ctx context.Context, healthy bool, reason string) {
	n.upgrades.mu.Lock()
	defer n.upgrades.mu.Unlock()

	s, ok, err := n.slots().Load()
	if err != nil || !ok || s.Trial == nil {
		return
	}

	if healthy {
		if err := n.saveSlots(upgrade.Confirm(s)); err != nil {
			n.log.Error("upgrade not confirmed", slog.String(logkey.Error, err.Error()))

			return
		}

		n.log.Info("upgrade confirmed", slog.String(logkey.Version, s.Active.Version))
		n.bus.Publish(&machine.SequenceEvent{Sequence: "upgrade", Action: machine.SequenceEvent_STOP}, "")
		n.releaseLease(ctx)

		return
	}

	rolled, ended := upgrade.GiveUp(s, n.clock.Now(), reason)
	if reason == "" {
		rolled, reason, ended = upgrade.Expire(s, n.clock.Now())
	}

	if !ended {
		return
	}

	if err := n.saveSlots(rolled); err != nil {
		n.log.Error("upgrade not rolled back", slog.String(logkey.Reason, reason), slog.String(logkey.Error, err.Error()))

		return
	}

	n.rolledBack(rolled, reason)
	n.request(lifecycleRequest{switchVersion: true})
}

// startDecision publishes what cmd/machined decided on the slots at this
// start: a promotion begins a trial, a rollback says why.
func (n *Node) startDecision() {
	d := n.cfg.StartDecision

	switch d.Outcome {
	case upgrade.Promoted:
		n.log.Info("upgrade on trial", slog.String(logkey.Version, n.running().Version))
	case upgrade.RolledBack:
		s, _, _ := n.slots().Load()
		n.rolledBack(s, d.Reason)
	case upgrade.Unchanged, upgrade.OnTrial:
	}
}
