// Package lifecycle follows nodes through a reboot or a shutdown by their
// machine status (the resource API's MachineStatuses/machine): a reboot is
// over once the node, having left the running stage or its API having
// gone, is running and ready again; a shutdown once its API is gone. Each
// stage the node reports is handed to a callback, so that the caller
// prints it. The package imports no server package.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// RetryInterval is the pause before watching a node whose API is down
// again: a node's API comes back within seconds of a reboot, and a watch
// is cheap to try.
const RetryInterval = time.Second

// Options say which procedure is followed and where progress goes.
type Options struct {
	// Client reaches the nodes through the endpoint. Required.
	Client *client.Client
	// Shutdown: the wait is over once a node's API is gone. false: a
	// reboot, over once the node is running and ready again.
	Shutdown bool
	// Timeout bounds the whole wait, from Run. Zero or less gives the
	// nodes no time: each is reported not done.
	Timeout time.Duration
	// Clock paces the retries while a node's API is down. nil: the
	// system clock.
	Clock clock.Clock
	// Progress receives each line of a node's progress (its stage as
	// reported, "API down, waiting", "down"), one call at a time; node is
	// "" for the endpoint's own node. nil: progress is discarded.
	Progress func(node, line string)
}

// Failure is a node whose wait did not end well.
type Failure struct {
	// Node as given to Run; "" for the endpoint's own node.
	Node string
	// Err says what the node last showed.
	Err error
}

// Waiter follows nodes through one reboot or shutdown.
type Waiter struct {
	opts Options
	// before holds each node's machine status version before the call: a
	// status of that version is the old one, whatever else happened.
	before map[string]string

	mu sync.Mutex // one Progress call at a time
}

// New returns a Waiter with opts, its defaults applied.
func New(opts Options) *Waiter {
	opts.Clock = defaults.Clock(opts.Clock)
	if opts.Progress == nil {
		opts.Progress = func(string, string) {}
	}

	return &Waiter{opts: opts, before: map[string]string{}}
}

// RecordBefore notes each node's machine status version (the endpoint's
// own when nodes is empty), before the reboot or shutdown is asked for; a
// node whose status cannot be read is waited for without one.
func (w *Waiter) RecordBefore(ctx context.Context, nodes []string) {
	w.before = map[string]string{}

	for _, node := range orOwn(nodes) {
		if r, err := w.opts.Client.COSI.Get(route(ctx, node), runtime.NewMachineStatus().Metadata()); err == nil {
			w.before[node] = r.Metadata().Version().String()
		}
	}
}

// Run waits for every node (the endpoint's own when nodes is empty) at
// once and returns those that failed, in the order they failed.
func (w *Waiter) Run(ctx context.Context, nodes []string) []Failure {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []Failure
	)

	for _, node := range orOwn(nodes) {
		wg.Go(func() {
			if err := w.node(ctx, node); err != nil {
				mu.Lock()
				failed = append(failed, Failure{Node: node, Err: err})
				mu.Unlock()
			}
		})
	}

	wg.Wait()

	return failed
}

// node waits for one node, watching again whenever its API comes back
// (a reboot), or until it is gone (a shutdown).
func (w *Waiter) node(ctx context.Context, node string) error {
	var (
		moved bool   // the node left the running stage, or its API went
		last  string // the last line reported
	)

	for {
		err := w.watch(ctx, node, &moved, &last)
		if err == nil {
			return nil
		}

		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("not done within %s (last seen: %s)", w.opts.Timeout, orNothing(last))
		case w.opts.Shutdown:
			// The node accepted the shutdown and its API is gone.
			w.report(node, "down")

			return nil
		}

		moved = true

		if last != "API down" {
			last = "API down"
			w.report(node, "API down, waiting")
		}

		if !clock.Sleep(ctx, w.opts.Clock, RetryInterval) {
			return fmt.Errorf("not done within %s (last seen: %s)", w.opts.Timeout, last)
		}
	}
}

// errGone ends the watch of a node shut down whose API no longer answers.
var errGone = errors.New("the node's API is gone")

// watch follows the node's machine status until the wait is over (nil) or
// the watch breaks (its error). The COSI client retries a broken watch by
// itself, without end, so that a shutdown's watch would never break: once
// a node being shut down has left the running stage, its API is asked
// every RetryInterval whether it is still there.
func (w *Waiter) watch(ctx context.Context, node string, moved *bool, last *string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ctx = route(ctx, node)

	events := make(chan state.Event)
	if err := w.opts.Client.COSI.Watch(ctx, runtime.NewMachineStatus().Metadata(), events); err != nil {
		return err
	}

	for {
		var (
			ev    state.Event
			probe clock.Timer
			tick  <-chan time.Time
		)

		if w.opts.Shutdown && *moved {
			probe = w.opts.Clock.NewTimer(RetryInterval)
			tick = probe.C()
		}

		ticked := false

		select {
		case <-ctx.Done():
		case <-tick:
			ticked = true
		case ev = <-events:
		}

		if probe != nil {
			probe.Stop()
		}

		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case ticked:
			if w.gone(ctx) {
				return errGone
			}

			continue
		}

		if ev.Type == state.Errored {
			return ev.Error
		}

		ms, ok := ev.Resource.(*runtime.MachineStatus)
		if !ok || ev.Type == state.Destroyed {
			continue
		}

		spec := ms.TypedSpec()
		if line := DescribeMachineStatus(spec); line != *last {
			*last = line
			w.report(node, line)
		}

		old := ms.Metadata().Version().String() == w.before[node]

		if spec.Stage != runtime.MachineStageRunning {
			*moved = true
		} else if *moved && !old && spec.Status.Ready && !w.opts.Shutdown {
			return nil
		}
	}
}

// gone reports whether the node ctx routes to no longer answers: a read of
// its machine status fails Unavailable (refused, or unreachable through
// the endpoint) or within RetryInterval.
func (w *Waiter) gone(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, RetryInterval)
	defer cancel()

	_, err := w.opts.Client.COSI.Get(ctx, runtime.NewMachineStatus().Metadata())

	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	default:
		return errors.Is(err, context.DeadlineExceeded)
	}
}

// DescribeMachineStatus is one line of progress: the stage, whether the
// node is ready, and what it waits for.
func DescribeMachineStatus(spec *runtime.MachineStatusSpec) string {
	line := spec.Stage.String()
	if spec.Status.Ready {
		return line + ", ready"
	}

	conds := make([]string, 0, len(spec.Status.UnmetConditions))
	for _, c := range spec.Status.UnmetConditions {
		conds = append(conds, c.Name+": "+c.Reason)
	}

	if len(conds) == 0 {
		return line + ", not ready"
	}

	return line + ", not ready (" + strings.Join(conds, "; ") + ")"
}

// report hands one line to Progress, whole lines from concurrent nodes.
func (w *Waiter) report(node, line string) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.opts.Progress(node, line)
}

// orOwn is nodes, or the endpoint's own node ("") when there are none.
func orOwn(nodes []string) []string {
	if len(nodes) == 0 {
		return []string{""}
	}

	return nodes
}

// route sends a call to node, or to the endpoint's own node for "".
func route(ctx context.Context, node string) context.Context {
	if node == "" {
		return ctx
	}

	return client.WithNode(ctx, node)
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}

	return s
}
