package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"
)

// chrony is a chronyd serving NTP on a loopback address, from its local
// clock at stratum 8. It never adjusts the host clock (-x).
type chrony struct {
	addr    string // host:port
	cmd     *exec.Cmd
	done    chan error
	stopped sync.Once
}

func chronydPath(t *testing.T) string {
	t.Helper()

	for _, p := range []string{"/usr/sbin/chronyd", "/usr/bin/chronyd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}

	if p, err := exec.LookPath("chronyd"); err == nil {
		return p
	}

	t.Fatal("chronyd not found: run `make deps` (Debian package chrony)")

	return ""
}

// freePort returns a port free on ip for network ("udp" or "tcp") at the
// time of the call.
func freePort(t *testing.T, network, ip string) int {
	t.Helper()

	var addr net.Addr

	switch network {
	case "udp":
		c, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}

		addr = c.LocalAddr()
		c.Close()
	default:
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}

		addr = l.Addr()
		l.Close()
	}

	_, port, _ := net.SplitHostPort(addr.String())
	n, _ := strconv.Atoi(port)

	return n
}

// startChrony runs chronyd on ip and waits until it answers with a reply
// fit for synchronization. It is stopped when the test ends.
func startChrony(t *testing.T, ip string) *chrony {
	t.Helper()

	return runChrony(t, ip, freePort(t, "udp", ip), "")
}

// runChrony runs chronyd on ip:port; with a faketime offset such as "+1h"
// it serves a clock that far from the host's (libfaketime preloaded; the
// monotonic clock is left alone so chronyd's own timing holds).
func runChrony(t *testing.T, ip string, port int, offset string) *chrony {
	t.Helper()

	dir := t.TempDir()
	conf := filepath.Join(dir, "chrony.conf")

	// The client's queries to 127.0.1.x or 127.8.x.x come from 127.0.0.1,
	// the loopback route's source address, so it is allowed too.
	content := fmt.Sprintf("port %d\nbindaddress %s\nlocal stratum 8\nallow 127.0.0.1\nallow 127.0.1.0/24\nallow 127.8.0.0/16\n"+
		"cmdport 0\npidfile %s\ndriftfile %s\n",
		port, ip, filepath.Join(dir, "chronyd.pid"), filepath.Join(dir, "drift"))
	if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}

	// chronyd drops to its own user after start; keep it as the test's
	// user so it can write its files in the test's private directory.
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	c := &chrony{addr: net.JoinHostPort(ip, strconv.Itoa(port)), done: make(chan error, 1)}
	c.cmd = exec.Command(chronydPath(t), "-x", "-n", "-u", u.Username, "-f", conf)

	if offset != "" {
		// Preloaded into chronyd itself: the faketime wrapper would run it
		// as a child, out of reach of the signals that stop it.
		c.cmd.Env = append(os.Environ(), "LD_PRELOAD="+libfaketime(t), "FAKETIME="+offset, "FAKETIME_DONT_FAKE_MONOTONIC=1")
	}
	c.cmd.Stdout, c.cmd.Stderr = testWriter{t, "chronyd"}, testWriter{t, "chronyd"}

	if err = c.cmd.Start(); err != nil {
		t.Fatal(err)
	}

	go func() { c.done <- c.cmd.Wait() }()

	t.Cleanup(c.stop)
	c.waitServing(t)

	return c
}

func (c *chrony) waitServing(t *testing.T) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for ctx.Err() == nil {
		resp, err := ntp.QueryWithOptions(c.addr, ntp.QueryOptions{Timeout: time.Second})
		if err == nil && resp.Validate() == nil {
			return
		}

		select {
		case err := <-c.done:
			t.Fatalf("chronyd exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	t.Fatalf("chronyd on %s never served valid time", c.addr)
}

// libfaketime finds libfaketime (Debian package libfaketime, which the
// faketime package pulls in).
func libfaketime(t *testing.T) string {
	t.Helper()

	for _, pattern := range []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"} {
		if found, _ := filepath.Glob(pattern); len(found) > 0 {
			return found[0]
		}
	}

	t.Fatal("libfaketime not found: run `make deps` (Debian package faketime)")

	return ""
}

// kill ends chronyd at once, as a crash would.
func (c *chrony) kill() {
	c.stopped.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
}

// stop ends chronyd; calling it twice is harmless.
func (c *chrony) stop() {
	c.stopped.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)

		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// testWriter sends a child's output to the test log, line by line.
type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, p)

	return len(p), nil
}
