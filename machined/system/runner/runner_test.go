package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// notes records what a runner notified.
type notes struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newNotes() *notes { return &notes{ch: make(chan string, 100)} }

func (n *notes) notify(running bool, msg string) {
	n.mu.Lock()
	n.msgs = append(n.msgs, msg)
	n.mu.Unlock()
	n.ch <- msg
}

func (n *notes) next(t *testing.T) string {
	t.Helper()

	select {
	case m := <-n.ch:
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no notification")

		return ""
	}
}

func TestProcessCapturesOutputAndExitCode(t *testing.T) {
	var out logtest.Sink

	r := Process(ProcessConfig{Path: "/bin/sh", Args: []string{"-c", "echo hello; echo oops >&2; exit 3"}, Log: &out})

	err := r.Run(context.Background(), func(bool, string) {})

	var exitErr interface{ ExitCode() int }
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit status 3", err)
	}

	if got := out.String(); !strings.Contains(got, "hello\n") || !strings.Contains(got, "oops\n") {
		t.Fatalf("log = %q", got)
	}
}

// TestProcessIgnoringSIGTERMIsKilled: a child that traps SIGTERM is killed
// once the grace period passes on the clock, and not before.
func TestProcessIgnoringSIGTERMIsKilled(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ready := fifo(t)
	r := Process(ProcessConfig{
		Path:        "/bin/sh",
		Args:        []string{"-c", `trap "" TERM; : > ` + ready + `; while true; do sleep 1; done`},
		GracePeriod: 30 * time.Second,
		Clock:       clk,
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	n := newNotes()

	go func() { done <- r.Run(ctx, n.notify) }()

	n.next(t)
	waitOpened(t, ready) // the trap is set
	cancel()

	waitTimers(t, clk, 1) // SIGTERM sent, grace timer armed

	select {
	case <-done:
		t.Fatal("process stopped on SIGTERM it ignores")
	case <-time.After(500 * time.Millisecond):
	}

	clk.Advance(30 * time.Second)

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stop returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("process not killed after the grace period")
	}
}

func TestProcessStopsCleanlyOnSIGTERM(t *testing.T) {
	r := Process(ProcessConfig{Path: "/bin/sleep", Args: []string{"100"}, GracePeriod: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	n := newNotes()

	go func() { done <- r.Run(ctx, n.notify) }()

	n.next(t)
	cancel()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stop returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sleep did not stop on SIGTERM")
	}
}

func TestProcessStartFailure(t *testing.T) {
	r := Process(ProcessConfig{Path: "/nonexistent/binary"})
	if err := r.Run(context.Background(), func(bool, string) {}); err == nil {
		t.Fatal("missing binary ran")
	}
}

// TestRestartBackoffGrows: a process that keeps crashing is restarted with
// steps of 1s, 2s, 4s, 8s, capped at 8s; without jitter each delay is the
// lower half of its step.
func TestRestartBackoffGrows(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	r := Restart(Process(ProcessConfig{Path: "/bin/sh", Args: []string{"-c", "exit 1"}}), RestartConfig{
		Policy: Forever, MinBackoff: time.Second, MaxBackoff: 8 * time.Second, Clock: clk, Rand: testutil.ZeroRand{},
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	n := newNotes()
	done := make(chan error, 1)

	go func() { done <- r.Run(ctx, n.notify) }()

	var delays []string

	for range 5 {
		if msg := n.next(t); !strings.HasPrefix(msg, "process ") {
			t.Fatalf("expected a start, got %q", msg)
		}

		msg := n.next(t)
		delays = append(delays, msg[strings.LastIndex(msg, " ")+1:])

		waitTimers(t, clk, 1)
		clk.Advance(time.Minute / 2)
	}

	if got := strings.Join(delays, ","); got != "500ms,1s,2s,4s,4s" {
		t.Fatalf("delays = %s", got)
	}

	cancel()

	if err := <-done; err != nil {
		t.Fatalf("stopped restart loop returned %v", err)
	}
}

// TestRestartDelayIsJittered: the delay is drawn from the upper half of its
// step, so services that crash together do not restart in lockstep.
func TestRestartDelayIsJittered(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	inner := Goroutine("crash", io.Discard, func(context.Context, io.Writer) error { return errors.New("boom") })
	r := Restart(inner, RestartConfig{
		Policy: Forever, MinBackoff: time.Second, MaxBackoff: 8 * time.Second, Clock: clk,
		Rand: bytes.NewReader(bytes.Repeat([]byte{0x80}, 64)),
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	n := newNotes()

	go func() { _ = r.Run(ctx, n.notify) }()

	for {
		msg := n.next(t)
		if !strings.Contains(msg, "; restarting in ") {
			continue
		}

		delay, err := time.ParseDuration(msg[strings.LastIndex(msg, " ")+1:])
		if err != nil {
			t.Fatal(err)
		}

		if delay <= 500*time.Millisecond || delay >= time.Second {
			t.Fatalf("first delay %s, want jittered within (500ms, 1s)", delay)
		}

		return
	}
}

func TestRestartPolicies(t *testing.T) {
	fail := errors.New("boom")

	tests := []struct {
		policy  Policy
		results []error
		runs    int
		want    error
	}{
		{policy: Once, results: []error{fail}, runs: 1, want: fail},
		{policy: UntilSuccess, results: []error{fail, fail, nil}, runs: 3, want: nil},
		{policy: UntilSuccess, results: []error{nil}, runs: 1, want: nil},
	}

	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			runs := 0
			inner := Goroutine("test", io.Discard, func(context.Context, io.Writer) error {
				runs++

				return tt.results[runs-1]
			})

			r := Restart(inner, RestartConfig{Policy: tt.policy, Clock: clk})
			done := make(chan error, 1)
			n := newNotes()

			go func() { done <- r.Run(context.Background(), n.notify) }()

			for {
				select {
				case err := <-done:
					if !errors.Is(err, tt.want) || runs != tt.runs {
						t.Fatalf("err = %v after %d runs, want %v after %d", err, runs, tt.want, tt.runs)
					}

					return
				case msg := <-n.ch:
					if strings.Contains(msg, "; restarting in ") {
						waitTimers(t, clk, 1)
						clk.Advance(time.Minute)
					}
				}
			}
		})
	}
}

func TestGoroutinePanicFailsTheRun(t *testing.T) {
	var out logtest.Sink

	r := Goroutine("bad", &out, func(context.Context, io.Writer) error { panic("kaboom") })

	err := r.Run(context.Background(), func(bool, string) {})
	if err == nil || !strings.Contains(err.Error(), "kaboom") || !strings.Contains(out.String(), "panic: kaboom") {
		t.Fatalf("err = %v, log = %q", err, out.String())
	}
}

// TestProcessLeavesNothingBehind: children the process started are killed
// with its group when it exits.
func TestProcessLeavesNothingBehind(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	r := Process(ProcessConfig{Path: "/bin/sh", Args: []string{"-c", "sleep 300 & echo $! > " + pidFile + "; exit 0"}})

	if err := r.Run(context.Background(), func(bool, string) {}); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}

	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}

	if !exits(t, pid, 10*time.Second) {
		t.Fatalf("child %d still running", pid)
	}
}

// exits reports whether pid exits within timeout; a zombie waiting to be
// reaped has exited. It waits on a pidfd, which becomes readable when the
// process exits.
func exits(t *testing.T, pid int, timeout time.Duration) bool {
	t.Helper()

	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // gone and reaped already
	}

	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)

	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(timeout.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}

		if err != nil {
			t.Fatalf("poll pidfd %d: %v", pid, err)
		}

		return n == 1
	}
}

func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
}

// fifo makes a named pipe: a process that opens it for writing blocks
// until the test opens it for reading, which tells the test it got there.
func fifo(t *testing.T) string {
	t.Helper()

	path := filepath.Join(t.TempDir(), "ready")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}

	return path
}

// waitOpened returns once a writer has opened the named pipe at path and
// closed it again.
func waitOpened(t *testing.T, path string) {
	t.Helper()

	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
}
