// Package runner runs the work of a service: a goroutine in machined, or a
// process of its own. A restart policy wraps any runner. A containerd runner
// will join them behind the same interface.
package runner

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// Notify tells the service framework what the runner is doing: running is
// true once the work has started; false with a message while the runner
// waits (before a restart, say).
type Notify func(running bool, message string)

// Runner does a service's work.
type Runner interface {
	// Run does the work until it ends or ctx is cancelled. Cancelling ctx
	// asks the work to stop; Run returns once it has (a process runner
	// escalates to SIGKILL after its grace period). Run returns nil when the
	// work ended well or was stopped, and the reason when it failed.
	Run(ctx context.Context, notify Notify) error
	// String describes the runner for logs and events.
	String() string
}

// Func is the work of a goroutine runner. It writes its log lines to log
// and returns when done or when ctx is cancelled.
type Func func(ctx context.Context, log io.Writer) error

type goroutine struct {
	name string
	fn   Func
	log  io.Writer
}

// Goroutine returns a runner for in-process work. A panic in fn is recovered
// and reported as the run's error, so it fails the service, not machined.
func Goroutine(name string, log io.Writer, fn Func) Runner {
	return &goroutine{name: name, fn: fn, log: log}
}

func (g *goroutine) String() string { return "goroutine " + g.name }

func (g *goroutine) Run(ctx context.Context, notify Notify) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(g.log, "panic: %v\n%s", r, debug.Stack())
			err = fmt.Errorf("runner: %s panicked: %v", g.name, r)
		}
	}()

	notify(true, "started")

	err = g.fn(ctx, g.log)
	if ctx.Err() != nil {
		// Stopped on request: whatever fn returned on the way out is not a failure.
		return nil
	}

	return err
}
