package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a server the harness started: in its own process group, so a
// Ctrl-C at the terminal reaches only the harness, which then stops it in
// order; output to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // valid once done is closed
}

// startProcess runs path with args, its output appended to logPath.
func startProcess(name, logPath, path string, args ...string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close() //nolint:errcheck // the child holds its own copy

	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	if err = cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w", name, err)
	}

	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}

	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	return p, nil
}

// PID of the process.
func (p *process) PID() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process's group, then SIGKILL after stopGrace,
// and waits until the process is gone.
func (p *process) stop() error {
	if p.exited() {
		return nil
	}

	pgid := -p.PID()
	_ = syscall.Kill(pgid, syscall.SIGTERM) //nolint:errcheck // gone already is fine

	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}

	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("bench: killing %s: %w", p.name, err)
	}

	<-p.done

	return fmt.Errorf("bench: %s ignored SIGTERM for %s; killed", p.name, stopGrace)
}

// tail returns the last lines of the process's log.
func (p *process) tail() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}

	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")

	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// waitListening waits until addr accepts TCP connections, failing early if
// the process exits.
func (p *process) waitListening(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	var d net.Dialer

	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}

		select {
		case <-p.done:
			return fmt.Errorf("bench: %s exited before listening on %s: %v\n%s", p.name, addr, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("bench: %s not listening on %s: %w\n%s", p.name, addr, ctx.Err(), p.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// untilOK retries call until it succeeds, for at most startTimeout, or
// until p exits.
func untilOK(ctx context.Context, call func(context.Context) error, p *process) error {
	deadline := time.Now().Add(startTimeout)

	for {
		err := timedCall(ctx, call, nil)
		if err == nil || ctx.Err() != nil {
			return err
		}

		if p.exited() || time.Now().After(deadline) {
			return errors.Join(err, errors.New(p.tail()))
		}

		time.Sleep(50 * time.Millisecond)
	}
}

// cleanup is what a run must undo, undone newest first. It is safe for
// concurrent use.
type cleanup struct {
	mu    sync.Mutex
	steps []cleanupStep
}

type cleanupStep struct {
	name string
	fn   func() error
}

func (c *cleanup) push(name string, fn func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.steps = append(c.steps, cleanupStep{name, fn})
}

// run undoes every step, newest first, and returns what failed.
func (c *cleanup) run() error {
	c.mu.Lock()
	steps := c.steps
	c.steps = nil
	c.mu.Unlock()

	var errs []error

	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", steps[i].name, err))
		}
	}

	return errors.Join(errs...)
}
