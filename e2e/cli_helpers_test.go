package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The CLI tests' cluster lives in 127.6.0.0/28 (nodes .2 to .4); nodes
// started by hand join it from elsewhere in 127.6.0.0/24.
const cliCIDR = "127.6.0.0/28"

// cliCluster is a local cluster of real machined processes, and aegisctl
// run as a binary against it.
type cliCluster struct {
	*localcluster.Cluster

	home string // HOME of every aegisctl run, so nothing reads ~/.aegis
	dir  string // where the tests write client configs
}

// startCLICluster creates a cluster of one control plane and two workers;
// it is destroyed when the test ends.
func startCLICluster(t *testing.T) *cliCluster {
	t.Helper()

	return startClusterIn(t, "cli", cliCIDR, 2)
}

// startClusterIn creates a cluster of one control plane and workers in
// cidr; it is destroyed when the test ends.
func startClusterIn(t *testing.T, name, cidr string, workers int) *cliCluster {
	t.Helper()
	needBinaries(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: name, ControlPlanes: 1, Workers: workers, CIDR: netip.MustParsePrefix(cidr),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: waitTimeout,
		Runtime: certs.RuntimeProcess, // not about containers: the quicker runtime
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("last lines of %s:\n%s", n.Name, c.Tail(n, 20))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return &cliCluster{Cluster: c, home: t.TempDir(), dir: t.TempDir()}
}

// cliResult is what one aegisctl run printed and how it exited.
type cliResult struct {
	stdout, stderr string
	code           int
}

// ctl runs aegisctl with the client config cfg and args.
func (c *cliCluster) ctl(t *testing.T, cfg string, args ...string) cliResult {
	t.Helper()

	runCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var stdout, stderr bytes.Buffer

	cmd := exec.CommandContext(runCtx, filepath.Join(binDir, "aegisctl"), append([]string{"--aegisconfig", cfg}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH")}

	err := cmd.Run()

	var exit *exec.ExitError

	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}

	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("aegisctl %s: %v", strings.Join(args, " "), err)
	}

	return res
}

// stream runs an aegisctl command that follows until interrupted, waits
// until its output satisfies until, interrupts it and checks that it ends
// cleanly. It returns the output.
func (c *cliCluster) stream(t *testing.T, cfg string, until func(string) bool, args ...string) string {
	t.Helper()

	var stdout, stderr logtest.Sink

	cmd := exec.Command(filepath.Join(binDir, "aegisctl"), append([]string{"--aegisconfig", cfg}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH")}

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)

	go func() { done <- cmd.Wait() }()

	deadline := time.After(timeout)

	for !until(stdout.String()) {
		select {
		case err := <-done:
			t.Fatalf("aegisctl %s ended early: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("aegisctl %s: timed out; output so far:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}

	_ = cmd.Process.Signal(os.Interrupt)

	if err := <-done; err != nil {
		t.Fatalf("aegisctl %s after an interrupt: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}

	return stdout.String()
}

// ok runs aegisctl and fails the test unless it succeeds.
func (c *cliCluster) ok(t *testing.T, cfg string, args ...string) string {
	t.Helper()

	res := c.ctl(t, cfg, args...)
	if res.code != 0 {
		t.Fatalf("aegisctl %s: exit %d\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}

	return res.stdout
}

// admin is the cluster's own admin client config.
func (c *cliCluster) admin() string { return c.ClientConfigPath() }

// configNew has the control plane issue a client config named name.
func (c *cliCluster) configNew(t *testing.T, name string, args ...string) string {
	t.Helper()

	path := filepath.Join(c.dir, name)
	c.ok(t, c.admin(), append([]string{"config", "new", path}, args...)...)

	return path
}

// addresses returns the node addresses, control plane first, joined.
func (c *cliCluster) all() string { return strings.Join(c.Addresses(), ",") }

// waitUntil waits for cond, as waitFor does for a check without an error.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()

	waitFor(t, what, func() error {
		if cond() {
			return nil
		}

		return errors.New("not yet")
	})
}

// pidsOf finds the processes running binary with an argument that
// contains marker (a node's state directory).
func pidsOf(binary, marker string) []int {
	entries, _ := os.ReadDir("/proc")

	var pids []int

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}

		args := bytes.Split(cmdline, []byte{0})
		if string(args[0]) == binary && bytes.Contains(cmdline, []byte(marker)) {
			pids = append(pids, pid)
		}
	}

	return pids
}

// refusesConnections reports whether nothing listens on addr:50000.
func refusesConnections(addr string) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(wire.APIDPort)), time.Second)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}

	conn.Close()

	return false
}

// startWorker starts a worker named name on addr that joins with token.
func (c *cliCluster) startWorker(t *testing.T, name, addr, token string) *machinedProc {
	t.Helper()

	now := time.Now()

	bundle, err := certs.LoadBundle(c.SecretsPath(), now)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.GenerateMachineConfig(bundle, certs.NodeWorker, certs.ConfigOptions{
		ClusterName: c.Name, Endpoint: c.ControlPlanes()[0].Address, TrustHostClock: true, Hostname: name, ListenAddress: addr,
	}, now)
	if err != nil {
		t.Fatal(err)
	}

	cfg.Machine.Token = token

	dir := filepath.Join(c.Dir, name)
	if err = os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	if err = cfg.Save(filepath.Join(dir, "config.yaml"), false); err != nil {
		t.Fatal(err)
	}

	return startMachined(t, filepath.Join(dir, "config.yaml"), filepath.Join(dir, "state"))
}

// logged reports whether the node's log has a record whose message is msg
// and that contains every one of texts.
func (p *machinedProc) logged(msg string, texts ...string) bool {
	for line := range strings.Lines(p.out.String()) {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}

		match := true
		for _, text := range texts {
			match = match && strings.Contains(line, text)
		}

		if match {
			return true
		}
	}

	return false
}
