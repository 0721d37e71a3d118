package system

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// postStopTimeout bounds a service's post-stop step.
const postStopTimeout = 30 * time.Second

// instance runs one service through its lifecycle.
type instance struct {
	svc Service
	m   *Manager

	mu      sync.Mutex
	state   State
	message string
	health  health.Status
	history []HistoryEntry
	// restarts counts the runs that ended while Running and that the
	// restart policy starts again (not a runner's own wait, such as etcd's
	// for a bootstrap).
	restarts int
	cancel   context.CancelFunc // of the current run, nil when none
	done     chan struct{}      // closed when the current run has ended
}

// start begins a run unless one is in progress.
func (i *instance) start() {
	i.mu.Lock()
	defer i.mu.Unlock()

	if i.cancel != nil {
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	i.cancel, i.done = cancel, make(chan struct{})
	i.health = health.Status{Unknown: true}

	go i.run(ctx, i.done)
}

// stop ends the current run, if any, and waits for it or for ctx.
func (i *instance) stop(ctx context.Context) error {
	i.mu.Lock()
	cancel, done := i.cancel, i.done
	i.mu.Unlock()

	if cancel == nil {
		return nil
	}

	i.record(StateStopping, "stop requested")
	cancel()

	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("system: %s did not stop: %w", i.svc.ID(), ctx.Err())
	}
}

// run is one pass through the lifecycle: wait for dependencies and the
// condition, prepare, start the runner, and record how it ended.
func (i *instance) run(ctx context.Context, done chan struct{}) {
	defer func() {
		i.mu.Lock()
		i.cancel = nil
		i.mu.Unlock()
		close(done)
		i.m.broadcast()
	}()

	state, msg := i.lifecycle(ctx)
	if ctx.Err() != nil {
		state, msg = StateFinished, "stopped"
	}

	i.record(state, msg)
}

func (i *instance) lifecycle(ctx context.Context) (State, string) {
	if err := i.waitDependencies(ctx); err != nil {
		return StateFinished, "stopped while waiting"
	}

	if c, ok := i.svc.(Conditioner); ok {
		i.record(StateWaiting, "waiting for "+c.Condition().String())

		if err := c.Condition().Wait(ctx); err != nil {
			return StateFailed, "condition: " + err.Error()
		}
	}

	if p, ok := i.svc.(PreStarter); ok {
		i.record(StatePreparing, "running pre-start step")

		if err := p.PreStart(ctx); err != nil {
			return StateFailed, "pre-start: " + err.Error()
		}
	}

	i.record(StateStarting, "starting")

	r, err := i.svc.Runner()
	if err != nil {
		return StateFailed, "building runner: " + err.Error()
	}

	err = i.runWithHealth(ctx, r)

	if p, ok := i.svc.(PostStopper); ok {
		pctx, cancel := context.WithTimeout(context.Background(), postStopTimeout)
		if perr := p.PostStop(pctx); perr != nil {
			i.m.log.Warn("post-stop step failed", slog.String(logkey.ServiceID, i.svc.ID()), slog.String(logkey.Error, perr.Error()))
		}

		cancel()
	}

	if err != nil {
		return StateFailed, err.Error()
	}

	return StateFinished, "exited"
}

// waitDependencies returns once every dependency is up. It records the
// wait when it begins and when what it waits for changes, not at every
// wake-up: a record wakes every waiting service, and services that
// recorded at each wake-up would wake each other without end.
func (i *instance) waitDependencies(ctx context.Context) error {
	var recorded string

	for {
		changed := i.m.changes()

		up, waiting := i.m.depsUp(i.svc)
		if up {
			return nil
		}

		if msg := "waiting for " + strings.Join(waiting, ", "); msg != recorded {
			i.record(StateWaiting, msg)
			recorded = msg
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runWithHealth runs the runner, running the health check while the runner
// reports the work as running.
func (i *instance) runWithHealth(ctx context.Context, r runner.Runner) error {
	var stopHealth context.CancelFunc = func() {}
	defer func() { stopHealth() }()

	check, settings, hasHealth := i.healthCheck()

	return r.Run(ctx, func(running bool, msg string) {
		stopHealth()

		if !running {
			i.mu.Lock()
			if i.state == StateRunning {
				i.restarts++
			}
			i.mu.Unlock()

			i.setHealth(health.Status{Unknown: true}, false)
			i.record(StateWaiting, msg)

			return
		}

		i.record(StateRunning, msg)

		if hasHealth {
			hctx, cancel := context.WithCancel(ctx)
			hdone := make(chan struct{})
			// Wait for the checker to exit, so no stale result lands after the run.
			stopHealth = func() { cancel(); <-hdone }

			go func() {
				defer close(hdone)
				health.Run(hctx, i.m.clock, settings, check, func(s health.Status) { i.setHealth(s, true) })
			}()
		}
	})
}

func (i *instance) healthCheck() (health.Check, health.Settings, bool) {
	h, ok := i.svc.(HealthChecker)
	if !ok {
		return nil, health.Settings{}, false
	}

	check, settings := h.HealthCheck()

	return check, settings, true
}

// record moves the service to state, keeps it in the history and publishes it.
func (i *instance) record(state State, msg string) {
	now := i.m.clock.Now()

	i.mu.Lock()
	i.state, i.message = state, msg

	i.history = append(i.history, HistoryEntry{State: state, Message: msg, Time: now})
	if len(i.history) > i.m.history {
		i.history = i.history[len(i.history)-i.m.history:]
	}

	ev := i.eventLocked()
	i.mu.Unlock()

	i.m.log.Info("service state", slog.String(logkey.ServiceID, i.svc.ID()), slog.String(logkey.State, state.String()), slog.String(logkey.Message, msg))
	i.m.bus.Publish(ev, "")
	i.m.broadcast()
}

// setHealth records a health change; publish is false for silent resets.
func (i *instance) setHealth(s health.Status, publish bool) {
	i.mu.Lock()
	i.health = s
	ev := i.eventLocked()
	i.mu.Unlock()

	if publish {
		i.m.log.Info("service health", slog.String(logkey.ServiceID, i.svc.ID()), slog.Bool(logkey.Healthy, s.Healthy), slog.String(logkey.Message, s.LastMessage))
		i.m.bus.Publish(ev, "")
	}

	i.m.broadcast()
}

func (i *instance) eventLocked() *machine.ServiceStateEvent {
	ev := &machine.ServiceStateEvent{Service: i.svc.ID(), Action: i.state.Action(), Message: i.message}

	if _, ok := i.svc.(HealthChecker); ok {
		ev.Health = &machine.ServiceHealth{
			Unknown: i.health.Unknown, Healthy: i.health.Healthy, LastMessage: i.health.LastMessage,
		}
		if !i.health.LastChange.IsZero() {
			ev.Health.LastChange = timestamppb.New(i.health.LastChange)
		}
	}

	return ev
}

func (i *instance) info() Info {
	i.mu.Lock()
	defer i.mu.Unlock()

	_, hasHealth := i.svc.(HealthChecker)

	return Info{
		ID: i.svc.ID(), State: i.state, Message: i.message,
		HasHealth: hasHealth, Health: i.health, Restarts: i.restarts,
		Events: append([]HistoryEntry(nil), i.history...),
	}
}
