package node

import (
	"context"
	"log/slog"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/logkey"
)

// lifecycleRequest is a reboot, a shutdown or a reset asked for through
// the API; Run takes one at a time (Node.requests holds one).
type lifecycleRequest struct {
	actor    string
	shutdown bool
	reset    *resetRequest // set by Reset
	// switchVersion ends machined for cmd/machined to run the active
	// slot: an upgrade, a rollback, a failed trial.
	switchVersion bool
}

// Run serves the node's sockets and runs boot sequences (again after each
// reboot) until a shutdown is asked for or ctx ends. After a reset it wipes
// the state directory once everything is stopped and closed, and returns
// ErrRebootAfterReset if the reset asked for a reboot. It closes the
// listening sockets it holds for apid and trustd (Config.Listeners), but
// when it returns ErrSwitchVersion.
func (n *Node) Run(ctx context.Context) error {
	last, err := n.run(ctx)
	if err == nil && last.switchVersion {
		// The listening sockets go on to the version switched to.
		return ErrSwitchVersion
	}

	n.cfg.Listeners.Close()

	if err != nil {
		return err
	}

	reset := last.reset
	if reset == nil {
		return nil
	}

	if err = n.wipe(); err != nil {
		return err
	}

	if reset.reboot {
		return ErrRebootAfterReset
	}

	return nil
}

func (n *Node) run(ctx context.Context) (lifecycleRequest, error) {
	defer n.closeLogs()

	if n.ctr != nil {
		defer n.ctr.close()
	}

	// Stopped after the sockets, and with them new applies, are closed.
	defer n.startBackground(ctx)()

	sockets, err := n.listen()
	if err != nil {
		return lifecycleRequest{}, err
	}
	defer sockets.stop()

	actor := ""

	for {
		req, done := n.runBoot(ctx, actor)

		n.stopServices(req)

		if done {
			n.log.Info("node stopped")

			return req, nil
		}

		actor = req.actor
	}
}

// startBackground starts what runs across boots until Run returns: the
// resources that follow the node's state and the rollback of a pending
// trial. The function it returns stops them and waits for their end.
func (n *Node) startBackground(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)

	var wg sync.WaitGroup

	n.followResources(ctx, &wg)
	wg.Go(func() { n.trials.run(ctx, n.clock, n.rollback) })
	n.startDecision()
	wg.Go(func() { n.watchTrial(ctx) })

	return func() {
		cancel()
		wg.Wait()
	}
}

// runBoot runs one boot and everything it starts until a lifecycle request
// or the end of ctx; it reports the request and whether machined should end.
func (n *Node) runBoot(ctx context.Context, actor string) (lifecycleRequest, bool) {
	n.bootID.renew(n.cfg.Rand, n.log)

	bootCtx, cancel := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() { n.boot(bootCtx, actor, &wg) })

	var (
		req  lifecycleRequest
		done bool
	)

	select {
	case req = <-n.requests:
		done = req.shutdown || req.switchVersion

		// A reset leaves the cluster while etcd and the heartbeats still
		// run; if it cannot, the node boots again unchanged.
		if req.reset != nil && !n.leave(ctx, req) {
			req, done = lifecycleRequest{actor: req.actor}, false
		}
	case <-ctx.Done():
		done = true
	}

	if done {
		n.endingNow.Do(func() { close(n.ending) })
	}

	cancel()
	wg.Wait()

	return req, done
}

func (n *Node) stopServices(req lifecycleRequest) {
	switch {
	case req.reset != nil: // stays RESETTING
	case req.shutdown:
		n.machineStatus(machine.MachineStatusEvent_SHUTTING_DOWN, "")
	default:
		n.machineStatus(machine.MachineStatusEvent_REBOOTING, "")
	}

	// A request made over the API (it has an actor) gives the caller's
	// follow of the events time to open (stopNotice); a signal does not wait.
	if req.actor != "" {
		<-n.clock.NewTimer(stopNotice).C()
	}

	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()

	// Talos's task, under the request's actor: talosctl's reboot, shutdown
	// and reset --wait follow the actor's events until this one, published
	// while apid still runs to carry it.
	n.bus.Publish(&machine.TaskEvent{Task: stopAllServicesTask, Action: machine.TaskEvent_START}, req.actor)

	if err := n.services.Stop(ctx); err != nil {
		n.log.Error("stopping services", slog.String(logkey.Error, err.Error()))
	}

	n.bus.Publish(&machine.TaskEvent{Task: stopAllServicesTask, Action: machine.TaskEvent_STOP}, req.actor)
}

// stopAllServicesTask is Talos's name for the task that stops every
// service before a reboot, a shutdown or a reset.
const stopAllServicesTask = "stopAllServices"

// Reboot asks the node to stop its services and boot again.
func (n *Node) Reboot(actor string) { n.request(lifecycleRequest{actor: actor}) }

// Shutdown asks the node to stop its services and machined to end.
func (n *Node) Shutdown(actor string) { n.request(lifecycleRequest{actor: actor, shutdown: true}) }

func (n *Node) request(r lifecycleRequest) {
	select {
	case n.requests <- r:
	default: // one is already pending; it wins
	}
}
