package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// bootTime is how long the machined of pid took from its start to the
// "node ready" in its log.
func bootTime(pid int, logPath string) (time.Duration, error) {
	start, err := processStart(pid)
	if err != nil {
		return 0, err
	}

	data, err := os.ReadFile(logPath)
	if err != nil {
		return 0, err
	}

	b := parseBootLog(data)
	if b.ready.IsZero() {
		return 0, fmt.Errorf("bench: no \"node ready\" in %s", logPath)
	}

	return b.ready.Sub(start), nil
}

// boot boots BootReps fresh one-node clusters and, once each is up, a
// worker that joins it, timing both.
func (r *run) boot(ctx context.Context) error {
	var cps, workers []time.Duration

	for i := range r.plan.BootReps {
		cp, w, err := r.bootOnce(ctx, fmt.Sprintf("boot-%d", i+1))
		if err != nil {
			return err
		}

		r.logf("boot %d/%d: control plane %s, worker %s", i+1, r.plan.BootReps, formatDuration(cp), formatDuration(w))
		cps, workers = append(cps, cp), append(workers, w)
	}

	r.bootResult().ControlPlane, r.bootResult().Worker = Summarize(cps), Summarize(workers)

	return nil
}

// bootResult is the run's Boot, made on first use: the boot stage and the
// cluster stage both fill it in.
func (r *run) bootResult() *Boot {
	if r.res.Boot == nil {
		r.res.Boot = &Boot{}
	}

	return r.res.Boot
}

func (r *run) bootOnce(ctx context.Context, name string) (cp, worker time.Duration, err error) {
	c, err := r.createCluster(ctx, name, BootCIDR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, r.destroy(c)) }()

	node := c.Nodes[0]
	if cp, err = bootTime(node.PID, c.LogPath(node)); err != nil {
		return 0, 0, err
	}

	w, err := r.startWorker(ctx, c, addrAt(BootCIDR, 3))
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, w.stop()) }()

	worker, err = bootTime(w.PID(), w.log)

	return cp, worker, err
}

// startWorker starts a worker of cluster c on addr, outside the cluster's
// own bookkeeping, and waits until it is ready.
func (r *run) startWorker(ctx context.Context, c *localcluster.Cluster, addr string) (*process, error) {
	now := time.Now()

	bundle, err := certs.LoadBundle(c.SecretsPath(), now)
	if err != nil {
		return nil, err
	}

	cfg, err := certs.GenerateMachineConfig(bundle, certs.NodeWorker, certs.ConfigOptions{
		ClusterName: c.Name, Endpoint: c.Nodes[0].Address, TrustHostClock: true,
		Hostname: c.Name + "-late-worker", ListenAddress: addr,
	}, now)
	if err != nil {
		return nil, err
	}

	dir := filepath.Join(r.dir, c.Name+"-late-worker")
	if err = os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	if err = cfg.Save(filepath.Join(dir, "config.yaml"), false); err != nil {
		return nil, err
	}

	p, err := r.start("worker machined", filepath.Join(dir, "machined.log"), filepath.Join(r.cfg.BinDir, "machined"),
		"--config", filepath.Join(dir, "config.yaml"), "--state", filepath.Join(dir, "state"), "--bin-dir", r.cfg.BinDir)
	if err != nil {
		return nil, err
	}

	if err = waitReady(ctx, p); err != nil {
		return nil, errors.Join(err, p.stop())
	}

	return p, nil
}

// waitReady waits for "node ready" in p's log.
func waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()

	for {
		data, _ := os.ReadFile(p.log) //nolint:errcheck // not written yet is fine: look again
		b := parseBootLog(data)

		switch {
		case !b.ready.IsZero():
			return nil
		case b.failed != "":
			return fmt.Errorf("bench: %s failed to boot: %s\n%s", p.name, b.failed, p.tail())
		}

		select {
		case <-p.done:
			return fmt.Errorf("bench: %s exited while booting: %v\n%s", p.name, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("bench: %s not ready: %w\n%s", p.name, ctx.Err(), p.tail())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// addrAt is the i-th address of prefix (0 is the prefix's own).
func addrAt(prefix netip.Prefix, i int) string {
	a := prefix.Masked().Addr()
	for range i {
		a = a.Next()
	}

	return a.String()
}

// createCluster creates a local cluster of one control plane and workers
// on cidr, under the run's directory, and puts its destruction on the
// clean-up list.
func (r *run) createCluster(ctx context.Context, name string, cidr netip.Prefix, workers int) (*localcluster.Cluster, error) {
	return r.createClusterOn(ctx, name, cidr, workers, "")
}

// createClusterOn is createCluster with every node on runtime rt (empty:
// the process runtime, left out of the configs).
func (r *run) createClusterOn(ctx context.Context, name string, cidr netip.Prefix, workers int, rt certs.Runtime) (*localcluster.Cluster, error) {
	c, err := localcluster.Create(ctx, localcluster.Options{
		Name: name, ControlPlanes: 1, Workers: workers, CIDR: cidr, Runtime: rt,
		StateDir: filepath.Join(r.dir, "clusters"), BinDir: r.cfg.BinDir, Timeout: clusterTimeout,
	})
	if err != nil {
		return nil, errors.Join(err, reap(filepath.Join(r.dir, "clusters", name), name))
	}

	r.clean.push("cluster "+name, func() error { return r.destroy(c) })

	return c, nil
}
