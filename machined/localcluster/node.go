package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
)

// NodeSpec describes a node to add to a running cluster.
type NodeSpec struct {
	// Name, Type and Address of the node; the address must be free.
	Name    string
	Type    certs.NodeType
	Address string
	// Configure may change the config generated for the node (from the
	// cluster's secrets, with a trusted host clock and the cluster's
	// control planes as endpoints) before it is saved. Nil keeps it.
	Configure func(*certs.MachineConfig)
}

// NodeByName returns the node called name.
func (c *Cluster) NodeByName(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}

	return Node{}, false
}

// AddNode writes the node's config, starts its machined and waits, until
// timeout, for it to report ready. The node is part of the cluster from
// then on: Destroy stops it too. On failure the node is stopped and
// forgotten, and its folder removed.
func (c *Cluster) AddNode(ctx context.Context, spec NodeSpec, timeout time.Duration) (Node, error) {
	if err := certs.CheckClusterName(spec.Name); err != nil {
		return Node{}, fmt.Errorf("localcluster: node name: %w", err)
	}

	if c.Net != nil {
		return Node{}, errors.New("localcluster: adding a node to a netns cluster is not supported")
	}

	if _, taken := c.NodeByName(spec.Name); taken {
		return Node{}, fmt.Errorf("localcluster: node %s exists", spec.Name)
	}

	if err := portsFree(spec.Address, spec.Type.IsControlPlane(), c.Metrics); err != nil {
		return Node{}, err
	}

	n := Node{Name: spec.Name, Type: spec.Type, Address: spec.Address}

	if err := c.writeNodeConfig(n, spec.Configure); err != nil {
		return Node{}, err
	}

	c.Nodes = append(c.Nodes, n)

	n, err := c.StartNode(ctx, spec.Name, timeout)
	if err != nil {
		_ = c.RemoveNode(spec.Name) //nolint:errcheck // undoing our own half-made node
	}

	return n, err
}

func (c *Cluster) writeNodeConfig(n Node, configure func(*certs.MachineConfig)) error {
	bundle, err := certs.LoadBundle(c.SecretsPath(), time.Now())
	if err != nil {
		return err
	}

	var endpoints []string
	for _, cp := range c.ControlPlanes() {
		endpoints = append(endpoints, cp.Address)
	}

	if len(endpoints) == 0 {
		endpoints = []string{n.Address}
	}

	cfg, err := c.nodeConfig(bundle, n, endpoints, time.Now())
	if err != nil {
		return err
	}

	if configure != nil {
		configure(cfg)
	}

	if err = os.MkdirAll(c.nodeDir(n), 0o700); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}

	return cfg.Save(c.ConfigPath(n), true)
}

// nodeConfig is the machine config of node n of the cluster, joining
// through endpoints (the control planes' addresses).
func (c *Cluster) nodeConfig(bundle *certs.Bundle, n Node, endpoints []string, now time.Time) (*certs.MachineConfig, error) {
	cfg, err := certs.GenerateMachineConfig(bundle, n.Type, certs.ConfigOptions{
		ClusterName: c.Name, Endpoint: endpoints[0], TrustHostClock: true, Hostname: n.Name, ListenAddress: n.Address,
		Runtime: c.Runtime,
	}, now)
	if err != nil {
		return nil, err
	}

	cfg.Cluster.ControlPlane.Endpoints = endpoints
	cfg.Machine.Metrics.Enabled = c.Metrics

	return cfg, nil
}

// StartNode starts the machined of a stopped or killed node (its state is
// kept) and waits, until timeout, for it to report ready.
func (c *Cluster) StartNode(ctx context.Context, name string, timeout time.Duration) (Node, error) {
	i := c.index(name)
	if i < 0 {
		return Node{}, fmt.Errorf("localcluster: no node %s", name)
	}

	n := c.Nodes[i]
	if c.running(n) {
		return n, fmt.Errorf("localcluster: node %s runs already (pid %d)", n.Name, n.PID)
	}

	var offset int64
	if st, err := os.Stat(c.LogPath(n)); err == nil {
		offset = st.Size()
	}

	pid, err := c.start(n)
	if err != nil {
		return n, err
	}

	c.Nodes[i].PID = pid
	n = c.Nodes[i]

	if err = c.save(); err != nil {
		return n, err
	}

	return n, c.watchCrashLoops(ctx, []Node{n}, []int64{offset}, func(ctx context.Context) error {
		return c.waitNodeReady(ctx, n, offset, timeout)
	})
}

// waitNodeReady waits until n's log, from offset on, reports the node ready.
func (c *Cluster) waitNodeReady(ctx context.Context, n Node, offset int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)

	for {
		st := c.bootStatusFrom(n, offset)

		switch {
		case st.ready:
			return nil
		case st.failed != "":
			return fmt.Errorf("localcluster: node %s failed to boot: %s\n%s", n.Name, st.failed, c.Tail(n, tailLines))
		case c.exited(n):
			return fmt.Errorf("localcluster: node %s exited while booting:\n%s", n.Name, c.Tail(n, tailLines))
		case time.Now().After(deadline):
			return fmt.Errorf("localcluster: node %s not ready after %s:\n%s", n.Name, timeout, c.Tail(n, tailLines))
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// StopNode stops a node's machined gracefully (see Destroy) and keeps its state.
func (c *Cluster) StopNode(name string) error {
	n, ok := c.NodeByName(name)
	if !ok {
		return fmt.Errorf("localcluster: no node %s", name)
	}

	return c.stop(n)
}

// RemoveNode stops a node, removes its folder and forgets it.
func (c *Cluster) RemoveNode(name string) error {
	i := c.index(name)
	if i < 0 {
		return fmt.Errorf("localcluster: no node %s", name)
	}

	n := c.Nodes[i]
	if err := c.stop(n); err != nil {
		return err
	}

	if err := os.RemoveAll(c.nodeDir(n)); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}

	c.Nodes = append(c.Nodes[:i], c.Nodes[i+1:]...)

	return c.save()
}

// Kill ends a node as a power loss would: machined and every process it
// runs get SIGKILL, and nothing gets to clean up. machined is frozen first
// so that it starts nothing while its processes are found and killed. Its
// state is kept for StartNode.
func (c *Cluster) Kill(name string) error {
	n, ok := c.NodeByName(name)
	if !ok {
		return fmt.Errorf("localcluster: no node %s", name)
	}

	if c.exited(n) {
		return nil
	}

	if err := syscall.Kill(n.PID, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("localcluster: freezing %s: %w", n.Name, err)
	}

	var errs []error

	for _, pid := range append(Descendants(n.PID), n.PID) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("localcluster: killing pid %d of %s: %w", pid, n.Name, err))
		}
	}

	// exited looks twice: a process whose first thread is on its way out
	// shows neither its arguments nor yet a zombie's state for a moment.
	for deadline := time.Now().Add(stopGrace); !c.exited(n) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}

	return errors.Join(errs...)
}

func (c *Cluster) index(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}

	return -1
}

// Descendants returns the processes below pid (children, their children,
// …), read from /proc, children before their own children.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}

	children := map[int][]int{}

	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		if parent, ok := parentOf(p); ok {
			children[parent] = append(children[parent], p)
		}
	}

	var out []int

	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}

	return out
}

// parentOf reads a process's parent from /proc/PID/stat, whose second
// field (the command) may hold spaces and parentheses: the fields that
// follow start after the last ')'.
func parentOf(pid int) (int, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}

	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, false
	}

	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}

	parent, err := strconv.Atoi(fields[1])

	return parent, err == nil
}
