package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// aegisctl runs the aegisctl binary with its client config in dir.
func aegisctl(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()

	cmd := exec.Command(filepath.Join(binDir, "aegisctl"), args...)
	cmd.Env = append(os.Environ(), "AEGISCONFIG="+filepath.Join(dir, "aegisconfig"))
	out, err := cmd.CombinedOutput()

	return string(out), err
}

// TestClusterCreateAndDestroy creates clusters with the CLI, 1+2 and 3+5
// nodes, and destroys them: nothing may be left running or on disk.
func TestClusterCreateAndDestroy(t *testing.T) {
	needContainerd(t)

	for _, tt := range []struct {
		cidr                   string
		controlPlanes, workers int
	}{
		{cidr: "127.9.0.0/24", controlPlanes: 1, workers: 2},
		{cidr: "127.9.1.0/24", controlPlanes: 3, workers: 5},
	} {
		t.Run(strconv.Itoa(tt.controlPlanes)+"+"+strconv.Itoa(tt.workers), func(t *testing.T) {
			dir := testutil.ShortTempDir(t)
			state := filepath.Join(dir, "clusters")

			t.Cleanup(func() {
				if c, err := localcluster.Load(state, "e2e"); err == nil {
					_ = c.Destroy()
				}
			})

			start := time.Now()

			out, err := aegisctl(t, dir, "cluster", "create", "--name", "e2e", "--cidr", tt.cidr, "--state-dir", state,
				"--controlplanes", strconv.Itoa(tt.controlPlanes), "--workers", strconv.Itoa(tt.workers), "--bin-dir", binDir)
			if err != nil {
				t.Fatalf("cluster create: %v\n%s", err, out)
			}

			t.Logf("cluster create %d+%d: %s to healthy", tt.controlPlanes, tt.workers, time.Since(start).Round(time.Millisecond))

			c, err := localcluster.Load(state, "e2e")
			if err != nil {
				t.Fatal(err)
			}

			if len(c.Nodes) != tt.controlPlanes+tt.workers || !strings.Contains(out, "is up in") {
				t.Fatalf("create output:\n%s", out)
			}

			cfg, err := certs.LoadClientConfig(filepath.Join(dir, "aegisconfig"))
			if err != nil || cfg.Context != "e2e" {
				t.Fatalf("context not merged: %v %v", cfg, err)
			}

			pids := allPIDs(t, c)

			if out, err = aegisctl(t, dir, "cluster", "destroy", "--name", "e2e", "--state-dir", state); err != nil {
				t.Fatalf("cluster destroy: %v\n%s", err, out)
			}

			for _, pid := range pids {
				if syscall.Kill(pid, 0) == nil && !zombie(pid) {
					t.Errorf("process %d left running", pid)
				}
			}

			if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
				t.Fatalf("state left behind: %v", err)
			}
		})
	}
}

// allPIDs lists the cluster's machined processes and their children.
func allPIDs(t *testing.T, c *localcluster.Cluster) []int {
	t.Helper()

	var pids []int

	for _, n := range c.Nodes {
		pids = append(pids, n.PID)

		// Children are listed per thread that forked them.
		tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(n.PID), "task", "*", "children"))
		if err != nil {
			t.Fatal(err)
		}

		for _, task := range tasks {
			children, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(children)) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
		}
	}

	if len(pids) < 2*len(c.Nodes) {
		t.Fatalf("found %d processes for %d nodes", len(pids), len(c.Nodes))
	}

	return pids
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}

	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))

	return len(fields) > 0 && fields[0] == "Z"
}

// TestClusterCreateRefusals: a taken address, a missing binary and a node
// that never comes up each give a clear error and leave nothing behind.
func TestClusterCreateRefusals(t *testing.T) {
	needBinaries(t)

	taken, err := net.Listen("tcp", "127.9.2.3:50000")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	noMachined := t.TempDir()
	failing := failingBinaries(t)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "address taken", args: []string{"--cidr", "127.9.2.0/24", "--bin-dir", binDir}, want: "127.9.2.3:50000 is not free"},
		{name: "binary missing", args: []string{"--cidr", "127.9.3.0/24", "--bin-dir", noMachined}, want: "binary machined not found"},
		{name: "node fails", args: []string{"--cidr", "127.9.4.0/24", "--bin-dir", failing, "--workers", "0", "--wait-timeout", "10s", "--runtime", "process"}, want: "apid: refusing to start for this test"},
		{name: "no images", args: []string{"--cidr", "127.9.5.0/24", "--bin-dir", failing, "--runtime", "containerd"}, want: "image archive"},
		{name: "unknown runtime", args: []string{"--cidr", "127.9.5.0/24", "--bin-dir", binDir, "--runtime", "docker"}, want: `--runtime: "docker" is not containerd or process`},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := testutil.ShortTempDir(t)
			state := filepath.Join(dir, "clusters")
			args := append([]string{"cluster", "create", "--name", "e2e", "--state-dir", state}, tt.args...)

			out, err := aegisctl(t, dir, args...)
			if err == nil || !strings.Contains(out, tt.want) {
				t.Fatalf("err = %v, want output containing %q:\n%s", err, tt.want, out)
			}

			if _, err := os.Stat(filepath.Join(state, "e2e")); !os.IsNotExist(err) {
				t.Fatalf("cluster folder left behind: %v", err)
			}

			if _, err := os.Stat(filepath.Join(dir, "aegisconfig")); !os.IsNotExist(err) {
				t.Fatalf("client config written: %v", err)
			}

			if left := lingering(dir); len(left) > 0 {
				t.Fatalf("processes left running: %q", left)
			}
		})
	}
}

// failingBinaries is a bin dir with the real machined and trustd and an apid
// that always fails, so a node never comes up.
func failingBinaries(t *testing.T) string {
	t.Helper()

	return crashingBinaries(t, "apid")
}

// crashingBinaries is a bin dir with the real binaries but for service's,
// a script that says why on stderr and exits at once.
func crashingBinaries(t *testing.T, service string) string {
	t.Helper()

	dir := t.TempDir()

	for _, name := range []string{"machined", "apid", "trustd", "etcd"} {
		if name == service {
			continue
		}

		if err := os.Symlink(filepath.Join(binDir, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}

	script := "#!/bin/sh\necho '" + service + ": refusing to start for this test' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, service), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	return dir
}

// TestClusterCreateFailsFastOnCrashLoop creates a cluster whose apid (or
// trustd) exits at once: cluster create gives up within seconds, not at its
// three-minute timeout, names the node, the service and its last log
// lines, and leaves no process and no folder behind.
func TestClusterCreateFailsFastOnCrashLoop(t *testing.T) {
	needBinaries(t)

	// The node boots in a few seconds, and the service's third exit comes
	// within about 4 s of its first (restart delays of 1 s, then 2 s).
	const bound = 30 * time.Second

	for i, service := range []string{"apid", "trustd"} {
		t.Run(service, func(t *testing.T) {
			bin := crashingBinaries(t, service)
			dir := testutil.ShortTempDir(t)
			state := filepath.Join(dir, "clusters")

			start := time.Now()
			out, err := aegisctl(t, dir, "cluster", "create", "--name", "crash", "--state-dir", state, "--bin-dir", bin,
				"--cidr", "127.9."+strconv.Itoa(6+i)+".0/24", "--workers", "0", "--runtime", "process")
			took := time.Since(start)

			if err == nil {
				t.Fatalf("cluster create succeeded:\n%s", out)
			}

			t.Logf("failed after %s:\n%s", took.Round(time.Millisecond), out)

			if took > bound {
				t.Errorf("cluster create took %s to fail, want under %s", took, bound)
			}

			for _, want := range []string{"node crash-controlplane-1", "service " + service + " exited 3 times", service + ": refusing to start for this test"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}

			if _, err := os.Stat(filepath.Join(state, "crash")); !os.IsNotExist(err) {
				t.Errorf("cluster folder left behind: %v", err)
			}

			if left := lingering(dir, bin); len(left) > 0 {
				t.Errorf("processes left running: %q", left)
			}
		})
	}
}

// lingering returns the command lines of the live processes that name one
// of dirs, once they have had settleExit to go: a service process machined
// started just before it was stopped gets its parent-death signal then, and
// on a loaded machine may take a moment to exit. One still there is a leak.
func lingering(dirs ...string) []string {
	deadline := time.Now().Add(settleExit)

	for {
		var left []string

		for _, d := range dirs {
			for _, pid := range processesUnder(d) {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
				left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
			}
		}

		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}

		time.Sleep(100 * time.Millisecond)
	}
}

// settleExit is how long lingering waits for processes on their way out.
const settleExit = 3 * time.Second

// processesUnder lists the live processes whose command line names dir.
func processesUnder(dir string) []int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")

	var pids []int

	for _, path := range cmdlines {
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), dir) {
			continue
		}

		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if !zombie(pid) {
			pids = append(pids, pid)
		}
	}

	return pids
}
