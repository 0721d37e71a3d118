package main

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

	"github.com/aegis-os/aegis/internal/clock"
)

// lifecycleWait follows each node's machine status (the resource API's
// MachineStatuses/machine) through a reboot or a shutdown, printing each
// stage as the node reports it: a reboot is over once the node, having
// left the running stage or its API having gone, is running and ready
// again; a shutdown once its API is gone.
type lifecycleWait struct {
	s        *session
	shutdown bool
	timeout  time.Duration
	// before holds each node's machine status version before the call: a
	// status of that version is the old one, whatever else happened.
	before map[string]string

	mu sync.Mutex // whole lines from concurrent nodes
}

// recordBefore notes each node's machine status version; a node whose
// status cannot be read is waited for without one.
func (w *lifecycleWait) recordBefore(ctx context.Context, nodes []string) {
	w.before = map[string]string{}

	if len(nodes) == 0 {
		nodes = []string{""}
	}

	for _, node := range nodes {
		nctx := ctx
		if node != "" {
			nctx = client.WithNode(ctx, node)
		}

		if r, err := w.s.client.COSI.Get(nctx, runtime.NewMachineStatus().Metadata()); err == nil {
			w.before[node] = r.Metadata().Version().String()
		}
	}
}

// run waits for every node (the endpoint's own when nodes is empty).
func (w *lifecycleWait) run(ctx context.Context, nodes []string) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()

	if len(nodes) == 0 {
		nodes = []string{""}
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []nodeFailure
	)

	for _, node := range nodes {
		wg.Go(func() {
			if err := w.node(ctx, node); err != nil {
				mu.Lock()
				failed = append(failed, nodeFailure{node: node, text: err.Error()})
				mu.Unlock()
			}
		})
	}

	wg.Wait()

	if len(failed) == 0 {
		return nil
	}

	for _, f := range failed {
		w.print(f.node, "error: "+f.text)
	}

	return &partialError{failed: failed, total: len(nodes)}
}

// node waits for one node, watching again whenever its API comes back
// (a reboot), or until it is gone (a shutdown).
func (w *lifecycleWait) node(ctx context.Context, node string) error {
	var (
		moved bool   // the node left the running stage, or its API went
		last  string // the last line printed
	)

	for {
		err := w.watch(ctx, node, &moved, &last)
		if err == nil {
			return nil
		}

		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("not done within %s (last seen: %s)", w.timeout, orNothing(last))
		case w.shutdown:
			// The node accepted the shutdown and its API is gone.
			w.print(node, "down")

			return nil
		}

		moved = true

		if last != "API down" {
			last = "API down"
			w.print(node, "API down, waiting")
		}

		if !clock.Sleep(ctx, w.s.e.clock, time.Second) {
			return fmt.Errorf("not done within %s (last seen: %s)", w.timeout, last)
		}
	}
}

// watch follows the node's machine status until the wait is over (nil) or
// the watch breaks (its error).
func (w *lifecycleWait) watch(ctx context.Context, node string, moved *bool, last *string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if node != "" {
		ctx = client.WithNode(ctx, node)
	}

	events := make(chan state.Event)
	if err := w.s.client.COSI.Watch(ctx, runtime.NewMachineStatus().Metadata(), events); err != nil {
		return err
	}

	for {
		var ev state.Event

		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev = <-events:
		}

		if ev.Type == state.Errored {
			return ev.Error
		}

		ms, ok := ev.Resource.(*runtime.MachineStatus)
		if !ok || ev.Type == state.Destroyed {
			continue
		}

		spec := ms.TypedSpec()
		if line := describeMachineStatus(spec); line != *last {
			*last = line
			w.print(node, line)
		}

		old := ms.Metadata().Version().String() == w.before[node]

		if spec.Stage != runtime.MachineStageRunning {
			*moved = true
		} else if *moved && !old && spec.Status.Ready && !w.shutdown {
			return nil
		}
	}
}

// describeMachineStatus is one line of progress: the stage, whether the
// node is ready, and what it waits for.
func describeMachineStatus(spec *runtime.MachineStatusSpec) string {
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

func (w *lifecycleWait) print(node, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if node == "" {
		fmt.Fprintln(w.s.e.stdout, text)

		return
	}

	fmt.Fprintf(w.s.e.stdout, "%s\t%s\n", node, text)
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}

	return s
}

var errWaitFormat = errors.New("--wait prints progress as text: leave out -o")
