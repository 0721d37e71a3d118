package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aegis-os/aegis/client/lifecycle"
)

// lifecycleWait is --wait of reboot and shutdown: lifecycle.Waiter
// following the session's nodes, each stage printed as a line of stdout.
type lifecycleWait struct {
	out    io.Writer
	waiter *lifecycle.Waiter
}

func newLifecycleWait(s *session, shutdown bool, timeout time.Duration) *lifecycleWait {
	w := &lifecycleWait{out: s.e.stdout}
	w.waiter = lifecycle.New(lifecycle.Options{
		Client: s.client, Shutdown: shutdown, Timeout: timeout, Clock: s.e.clock, Progress: w.print,
	})

	return w
}

// recordBefore notes each node's machine status before the call.
func (w *lifecycleWait) recordBefore(ctx context.Context, nodes []string) {
	w.waiter.RecordBefore(ctx, nodes)
}

// run waits for every node (the endpoint's own when nodes is empty); a
// node that failed is a line of its own and in the error.
func (w *lifecycleWait) run(ctx context.Context, nodes []string) error {
	failures := w.waiter.Run(ctx, nodes)
	if len(failures) == 0 {
		return nil
	}

	failed := make([]nodeFailure, len(failures))

	for i, f := range failures {
		failed[i] = nodeFailure{node: f.Node, text: f.Err.Error()}
		w.print(f.Node, "error: "+failed[i].text)
	}

	return &partialError{failed: failed, total: max(len(nodes), 1)}
}

// print writes one line of a node's progress; the endpoint's own node
// ("") is not named.
func (w *lifecycleWait) print(node, text string) {
	if node == "" {
		fmt.Fprintln(w.out, text)

		return
	}

	fmt.Fprintf(w.out, "%s\t%s\n", node, text)
}

var errWaitFormat = errors.New("--wait prints progress as text: leave out -o")
