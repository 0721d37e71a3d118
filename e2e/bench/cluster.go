package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/machined/localcluster"
)

// clusterEnv is the run's cluster and what the loads on it share.
type clusterEnv struct {
	c  *localcluster.Cluster
	cp localcluster.Node
	// cli is a Talos client with the cluster's admin credentials, talking
	// to the control plane's apid.
	cli *client.Client
	// cpProcs are the control plane's processes by name; allProcs are
	// every node's, and the harness's own.
	cpProcs  map[string]int
	allProcs []int
}

// clusterLoads starts the run's cluster (one control plane and
// ClusterWorkers workers, all at once), reads its processes' memory at
// idle, runs the apid, fan-out, join and stream-flood loads on it, reads the memory
// again, and destroys it.
func (r *run) clusterLoads(ctx context.Context) (err error) {
	r.logf("cluster: starting 1 control plane and %d workers on %s", r.plan.ClusterWorkers, ClusterCIDR)

	c, err := r.createCluster(ctx, "bench", ClusterCIDR, r.plan.ClusterWorkers)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.destroy(c)) }()

	if err = r.recordClusterUp(c); err != nil {
		return err
	}

	e, err := newClusterEnv(ctx, c)
	if err != nil {
		return err
	}
	defer e.cli.Close() //nolint:errcheck // a client; the cluster's stop is what counts

	watched, err := watchNodes(c)
	if err != nil {
		return err
	}

	if err = sleep(ctx, r.plan.Settle); err != nil {
		return err
	}

	idle := watched.read()
	err = r.loads(ctx, e)
	r.res.Memory = append(watched.memory(idle, watched.read()), r.res.Memory...)

	return err
}

// loads runs the loads on the cluster; a failed one leaves the others to run.
func (r *run) loads(ctx context.Context, e *clusterEnv) error {
	var errs []error

	for _, s := range []struct {
		name string
		fn   func(context.Context, *clusterEnv) error
	}{{"apid", r.apidLoads}, {"fan-out", r.fanOut}, {"join storm", r.joinStorms}, {"stream flood", r.streamFlood}} {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("%s: not run: %w", s.name, context.Cause(ctx)))

			continue
		}

		if err := s.fn(ctx, e); err != nil {
			r.logf("%s failed: %v", s.name, err)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}

	return errors.Join(errs...)
}

// newClusterEnv connects to the cluster and finds its processes.
func newClusterEnv(ctx context.Context, c *localcluster.Cluster) (*clusterEnv, error) {
	cli, err := c.Client(ctx)
	if err != nil {
		return nil, err
	}

	e := &clusterEnv{c: c, cp: c.ControlPlanes()[0], cli: cli, allProcs: []int{os.Getpid()}}

	for _, n := range c.Nodes {
		procs, err := nodeProcesses(n)
		if err != nil {
			return nil, errors.Join(err, cli.Close())
		}

		if n.PID == e.cp.PID {
			e.cpProcs = procs
		}

		for _, pid := range procs {
			e.allProcs = append(e.allProcs, pid)
		}
	}

	return e, nil
}

// recordClusterUp records how long the cluster took from its first
// machined's start until Create saw every service up.
func (r *run) recordClusterUp(c *localcluster.Cluster) error {
	up := time.Now()

	var first time.Time

	for _, n := range c.Nodes {
		start, err := processStart(n.PID)
		if err != nil {
			return err
		}

		if first.IsZero() || start.Before(first) {
			first = start
		}
	}

	b := r.bootResult()
	b.ClusterNodes, b.ClusterUp = len(c.Nodes), up.Sub(first)
	r.logf("cluster: %d nodes up in %s", len(c.Nodes), formatDuration(b.ClusterUp))

	return nil
}

// watchedProcess is a process whose memory the report shows.
type watchedProcess struct {
	process, role string
	pid           int
}

type watchedProcesses []watchedProcess

// nodeProcesses returns a node's machined and the services it runs (apid,
// and trustd and etcd on a control plane), by name.
func nodeProcesses(n localcluster.Node) (map[string]int, error) {
	children, err := childrenOf(n.PID)
	if err != nil {
		return nil, err
	}

	procs := map[string]int{"machined": n.PID}

	for _, name := range []string{"apid", "trustd", "etcd"} {
		if pid, ok := children[name]; ok {
			procs[name] = pid
		}
	}

	return procs, nil
}

// watchNodes finds machined, apid, trustd and etcd of the control plane and
// machined and apid of the first worker.
func watchNodes(c *localcluster.Cluster) (watchedProcesses, error) {
	var out watchedProcesses

	for _, n := range c.Nodes[:min(2, len(c.Nodes))] {
		role := RoleWorker
		if n.Type.IsControlPlane() {
			role = RoleControlPlane
		}

		procs, err := nodeProcesses(n)
		if err != nil {
			return nil, err
		}

		for _, name := range []string{"machined", "apid", "trustd", "etcd"} {
			if pid, ok := procs[name]; ok {
				out = append(out, watchedProcess{name, role, pid})
			}
		}
	}

	return out, nil
}

// read returns VmRSS and VmHWM of each process; zeros where unreadable.
func (w watchedProcesses) read() [][2]uint64 {
	out := make([][2]uint64, len(w))
	for i, p := range w {
		out[i][0], out[i][1], _ = readMemory(p.pid) //nolint:errcheck // a missing figure shows as "-"
	}

	return out
}

func (w watchedProcesses) memory(idle, loaded [][2]uint64) []Memory {
	out := make([]Memory, len(w))
	for i, p := range w {
		out[i] = Memory{Process: p.process, Role: p.role, IdleRSS: idle[i][0], IdleHWM: idle[i][1], LoadHWM: loaded[i][1]}
	}

	return out
}
