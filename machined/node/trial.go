package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

// rollbackTimeout bounds a trial's rollback: long enough for etcd's turn
// to restart and the restart itself, each bounded at two minutes by the
// etcd package, so that a rollback that cannot restart etcd ends, logged,
// rather than holding the apply lock.
const rollbackTimeout = 5 * time.Minute

// trial is a configuration applied in TRY mode: it is rolled back to
// previous at deadline unless a later apply confirms (replaces) it.
type trial struct {
	previous *certs.MachineConfig
	deadline time.Time
}

// trials is the pending TRY config, whose rollback Run's goroutine
// (trials.run) waits for.
type trials struct {
	// mu orders ApplyConfiguration calls and rollbacks; it guards pending.
	mu      sync.Mutex
	pending *trial
	// armed hands the pending trial (nil: none) to trials.run; it holds
	// the latest only, so that an apply never waits for the loop.
	armed chan *trial
}

func newTrials() trials { return trials{armed: make(chan *trial, 1)} }

// startTrial arms the rollback of a TRY to previous after d; the caller
// holds trials.mu. A trial on a trial keeps the first one's previous
// config: rollback goes back to what was confirmed.
func (n *Node) startTrial(previous *certs.MachineConfig, d time.Duration) {
	if n.trials.pending != nil {
		previous = n.trials.pending.previous
	}

	t := &trial{previous: previous, deadline: n.clock.Now().Add(d)}
	n.trials.pending = t
	latest(n.trials.armed, t)
}

// endTrial confirms a pending trial: a later apply replaces it. The caller
// holds trials.mu.
func (n *Node) endTrial() {
	if n.trials.pending != nil {
		n.trials.pending = nil
		latest(n.trials.armed, nil)
	}
}

// run waits for the deadline of the trial last armed and rolls it back
// then, until ctx ends: a trial still pending when Run returns is never
// rolled back in this process (it was never written to the config file,
// so the next start does not apply it either).
func (t *trials) run(ctx context.Context, clk clock.Clock, rollback func(context.Context, *trial)) {
	var (
		cur   *trial
		timer clock.Timer
	)

	stop := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
	defer stop()

	for {
		var fire <-chan time.Time
		if timer != nil {
			fire = timer.C()
		}

		select {
		case cur = <-t.armed:
			stop()

			if cur != nil {
				timer = clk.NewTimer(cur.deadline.Sub(clk.Now()))
			}
		case <-fire:
			timer = nil
			rollback(ctx, cur)
		case <-ctx.Done():
			return
		}
	}
}

// rollback puts a trial's previous config back in effect, unless the
// trial has been confirmed or replaced meanwhile. It runs under Run's
// ctx, within rollbackTimeout.
func (n *Node) rollback(ctx context.Context, t *trial) {
	n.trials.mu.Lock()
	defer n.trials.mu.Unlock()

	if n.trials.pending != t {
		return
	}

	n.trials.pending = nil

	ctx, cancel := context.WithTimeout(ctx, rollbackTimeout)
	defer cancel()

	changes, err := classify(n.config.current(), t.previous)
	if err != nil {
		n.log.Error("rolling back a trial config", slog.String(logkey.Error, err.Error()))

		return
	}

	plan := n.etcd.plan(n.config.current(), t.previous)
	n.logSettle(plan.acquire(ctx))
	defer plan.release()

	n.applyLive(t.previous, changes)

	_, err = n.settle(ctx, plan)
	n.logSettle(err)
	n.log.Info("trial machine config rolled back", slog.String(logkey.ConfigFields, strings.Join(changes.all, ",")))
}
