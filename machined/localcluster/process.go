package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
)

// stopGrace is how long a node's machined has to stop its services after
// SIGTERM before it is killed; machined's own services get 10 s each.
const stopGrace = 30 * time.Second

// exitRecheck is how long exited waits before it believes a node that
// does not look like it runs: far longer than the instant of an exec.
const exitRecheck = 100 * time.Millisecond

// startAll starts one machined per node, detached: its own session, no
// terminal, output to the node's log file. The PIDs go into the manifest.
func (c *Cluster) startAll() error {
	for i := range c.Nodes {
		pid, err := c.start(c.Nodes[i])
		if err != nil {
			return err
		}

		c.Nodes[i].PID = pid

		if err = c.save(); err != nil {
			return err
		}
	}

	return nil
}

func (c *Cluster) start(n Node) (int, error) {
	out, err := os.OpenFile(c.LogPath(n), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("localcluster: %w", err)
	}
	defer out.Close() //nolint:errcheck // the child holds its own copy

	args := []string{"--config", c.ConfigPath(n), "--state", c.StatePath(n), "--bin-dir", c.BinDir}
	if c.NodeCertTTL != 0 {
		args = append(args, "--node-cert-ttl", c.NodeCertTTL.String())
	}

	if c.HeartbeatInterval != 0 {
		args = append(args, "--heartbeat-interval", c.HeartbeatInterval.String())
	}

	if c.UpgradeTrial != 0 {
		args = append(args, "--upgrade-trial", c.UpgradeTrial.String())
	}

	cmd := exec.Command(filepath.Join(c.BinDir, "machined"), args...)
	if c.Net != nil {
		// nsenter execs machined in the node's network namespace, so the
		// PID is machined's. Not `ip netns exec`: that also remounts /sys
		// in a mount namespace of its own, which hides the cgroup
		// hierarchy runc needs for the containerd runtime.
		cmd = exec.Command("nsenter", append([]string{"--net=" + filepath.Join("/run/netns", c.Net.namespace(c, n)), "--", cmd.Path}, args...)...)
	}

	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = c.nodeDir(n)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}

	if err = cmd.Start(); err != nil {
		return 0, fmt.Errorf("localcluster: starting %s: %w", n.Name, err)
	}

	pid := cmd.Process.Pid

	// Reap it if it dies while this process still runs, and say how it
	// ended in its log (a signal leaves no line of its own); once this
	// process exits, the node lives on by itself.
	logPath := c.LogPath(n)

	go func() {
		_ = cmd.Wait()

		if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			fmt.Fprintf(f, "localcluster: machined (pid %d) ended: %s\n", pid, cmd.ProcessState)
			_ = f.Close()
		}
	}()

	return pid, nil
}

// exited reports whether n's machined has ended: not running, and still
// not a moment later. A process just started can look like another for
// an instant: the kernel closes the exec pipe os/exec waits on before it
// sets up the new program's arguments, so /proc/PID/cmdline may read empty
// right after Start returns.
func (c *Cluster) exited(n Node) bool {
	if c.running(n) {
		return false
	}

	time.Sleep(exitRecheck)

	return !c.running(n)
}

// running reports whether n's recorded machined still runs: the PID is
// alive and is the machined of this node (PIDs are reused), and it is not
// a zombie whose every thread has exited. The first thread of a Go
// process can turn zombie while the others still exit, and the last to
// exit closes the process's files: until then its listening sockets are
// bound, and a node started again on its addresses fails ("bind: address
// already in use", seen once in thirteen kills of a control plane under
// 1,000 hollow workers, and again under 10,000). Such a zombie's command
// line reads empty (its memory went with its first thread), so it is
// known by its state, not its arguments: a zombie is not reaped yet, so
// its PID is still the one recorded.
func (c *Cluster) running(n Node) bool {
	if n.PID <= 0 {
		return false
	}

	dir := filepath.Join("/proc", strconv.Itoa(n.PID))

	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return false
	}

	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) == 0 {
		return false
	}

	if fields[0] == "Z" {
		return threads(n.PID) > 1
	}

	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))

	return err == nil && bytes.Contains(cmdline, []byte(c.StatePath(n)))
}

// threads is how many threads of pid have not exited: the Threads field of
// its status; 0 when it cannot be read (the process is gone).
func threads(pid int) int {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}

	return threadsField(status)
}

// threadsField reads the Threads field of a /proc/PID/status.
func threadsField(status []byte) int {
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))

			return n
		}
	}

	return 0
}

// stop ends n's machined: SIGTERM, then SIGKILL after stopGrace; it waits
// until the process is gone.
func (c *Cluster) stop(n Node) error {
	if c.exited(n) {
		return nil
	}

	_ = syscall.Kill(n.PID, syscall.SIGTERM) //nolint:errcheck // gone already is fine

	deadline := time.Now().Add(stopGrace)
	for c.running(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}

	if !c.running(n) {
		return nil
	}

	if err := syscall.Kill(n.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("localcluster: killing %s (pid %d): %w", n.Name, n.PID, err)
	}

	for c.running(n) {
		time.Sleep(50 * time.Millisecond)
	}

	return nil
}

// Destroy stops every node's machined (workers first), waits for them and
// removes the cluster's folder and its context from the client config it
// was merged into.
func (c *Cluster) Destroy() error {
	var errs []error

	for i := len(c.Nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.stop(c.Nodes[i]))
	}

	if err := errors.Join(errs...); err != nil {
		return err
	}

	if c.Net != nil {
		if err := c.Net.tearDown(); err != nil {
			return err
		}
	}

	if c.ClientConfig != "" {
		if err := c.removeContext(); err != nil {
			return err
		}
	}

	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}

	return nil
}

// discard undoes a failed Create: it stops what started and removes the folder.
func (c *Cluster) discard() {
	c.ClientConfig = ""
	_ = c.Destroy() //nolint:errcheck // best effort on the way out of a failure
}

// writeClientConfig writes the cluster's admin client config.
func (c *Cluster) writeClientConfig(bundle *certs.Bundle, endpoints []string, now time.Time) error {
	cfg, err := certs.AdminClientConfig(bundle, c.Name, endpoints, 0, now)
	if err != nil {
		return err
	}

	data, err := cfg.Marshal()
	if err != nil {
		return err
	}

	return os.WriteFile(c.ClientConfigPath(), data, certs.ConfigFileMode)
}

// mergeContext adds the cluster's context to the client config at path,
// replacing a stale context of the same name, and makes it current.
func (c *Cluster) mergeContext(path string) error {
	own, err := certs.LoadClientConfig(c.ClientConfigPath())
	if err != nil {
		return err
	}

	cfg, err := certs.LoadOrNewClientConfig(path)
	if err != nil {
		return err
	}

	cfg.Merge(own, true)

	if err = cfg.Save(path); err != nil {
		return err
	}

	c.ClientConfig = path

	return c.save()
}

// removeContext removes the cluster's context from the client config it was
// merged into, if that context still holds this cluster's credentials.
func (c *Cluster) removeContext() error {
	own, err := certs.LoadClientConfig(c.ClientConfigPath())
	if err != nil {
		return nil //nolint:nilerr // nothing to compare with: leave the client config alone
	}

	cfg, err := certs.LoadClientConfig(c.ClientConfig)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}

	if err != nil {
		return err
	}

	ctx, ok := cfg.Contexts[c.Name]
	if !ok || !bytes.Equal(ctx.Crt, own.Contexts[c.Name].Crt) {
		return nil
	}

	delete(cfg.Contexts, c.Name)

	if cfg.Context == c.Name {
		cfg.Context = ""
	}

	return cfg.Save(c.ClientConfig)
}
