package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// runtimesCompared are the runtimes the runtime stage puts side by side,
// the reference first.
var runtimesCompared = []certs.Runtime{certs.RuntimeProcess, certs.RuntimeContainerd}

// runtimeServices are the services a control plane runs under its runtime.
var runtimeServices = []string{"apid", "trustd", "etcd"}

// runtimes boots one-node clusters on the process and the containerd
// runtime in turn (a fresh node, whose containerd imports the images, then
// the same node restarted, whose containerd holds them), then on a cluster
// of each runtime reads the memory of every process at idle and times
// Version straight to machined and through apid, and the fan-out.
func (r *run) runtimes(ctx context.Context) (err error) {
	figs := make([]RuntimeFigures, len(runtimesCompared))
	fresh, restart := make([][]time.Duration, len(figs)), make([][]time.Duration, len(figs))

	// The clusters' names are short ("rtc1"): containerd's sockets live in
	// the node's state directory, and a Unix socket's path may not be
	// longer than 104 bytes.
	for i := range r.plan.RuntimeBootReps {
		for j, rt := range runtimesCompared {
			f, w, err := r.bootTwice(ctx, fmt.Sprintf("rt%.1s%d", rt, i+1), rt)
			if err != nil {
				return fmt.Errorf("%s runtime: %w", rt, err)
			}

			r.logf("runtime boot %d/%d, %s: fresh %s, restarted %s", i+1, r.plan.RuntimeBootReps, rt, formatDuration(f), formatDuration(w))
			fresh[j], restart[j] = append(fresh[j], f), append(restart[j], w)
		}
	}

	for j, rt := range runtimesCompared {
		figs[j] = RuntimeFigures{Runtime: string(rt), Fresh: Summarize(fresh[j]), Restart: Summarize(restart[j])}
	}

	r.res.Runtimes = figs

	var errs []error

	for j, rt := range runtimesCompared {
		if ctx.Err() != nil {
			return errors.Join(append(errs, context.Cause(ctx))...)
		}

		if err := r.runtimeLoads(ctx, rt, &r.res.Runtimes[j]); err != nil {
			errs = append(errs, fmt.Errorf("%s runtime loads: %w", rt, err))
		}
	}

	return errors.Join(errs...)
}

// bootTwice creates a one-node cluster on rt and times its control plane's
// boot, then restarts it with its state kept and times that boot.
func (r *run) bootTwice(ctx context.Context, name string, rt certs.Runtime) (fresh, restart time.Duration, err error) {
	c, err := r.createClusterOn(ctx, name, RuntimeBootCIDR, 0, rt)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, r.destroy(c)) }()

	if fresh, err = bootTime(c.Nodes[0].PID, c.LogPath(c.Nodes[0])); err != nil {
		return 0, 0, err
	}

	if err = c.Restart(ctx, clusterTimeout); err != nil {
		return 0, 0, err
	}

	restart, err = bootTime(c.Nodes[0].PID, c.LogPath(c.Nodes[0]))

	return fresh, restart, err
}

// destroy destroys c and checks that nothing it ran is left (reap).
func (r *run) destroy(c *localcluster.Cluster) error {
	return errors.Join(c.Destroy(), reap(c.Dir, c.Name))
}

// reap looks for any process left of the cluster name in dir: a machined,
// containerd, shim or service whose command line names a path under dir,
// and the containers of a shim. It kills each and names it in the error:
// a cluster that was destroyed, or whose creation failed, must have
// stopped them all.
func reap(dir, name string) error {
	left, err := processesUnder(dir)
	if err != nil {
		return err
	}

	for _, p := range left {
		if kids, kerr := childrenOf(p.pid); kerr == nil && strings.HasPrefix(p.comm, "containerd-shim") {
			for comm, pid := range kids {
				left = append(left, procEntry{pid: pid, comm: comm})
			}
		}
	}

	var errs []error

	for _, p := range left {
		_ = syscall.Kill(p.pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
		errs = append(errs, fmt.Errorf("bench: %s (pid %d) of cluster %s still ran after it was stopped; killed", p.comm, p.pid, name))
	}

	return errors.Join(errs...)
}

// runtimeLoads makes a cluster of one control plane and RuntimeWorkers
// workers on rt, reads its control plane's processes' memory at idle, and
// times the apid and fan-out calls on it.
func (r *run) runtimeLoads(ctx context.Context, rt certs.Runtime, f *RuntimeFigures) (err error) {
	r.logf("runtime %s: 1 control plane and %d workers on %s", rt, r.plan.RuntimeWorkers, RuntimeLoadCIDR)

	c, err := r.createClusterOn(ctx, "rt"+string(rt)[:1], RuntimeLoadCIDR, r.plan.RuntimeWorkers, rt)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.destroy(c)) }()

	e, watched, err := runtimeEnv(ctx, c, rt)
	if err != nil {
		return err
	}
	defer e.cli.Close() //nolint:errcheck // a client; the cluster's stop is what counts

	if err = sleep(ctx, r.plan.Settle); err != nil {
		return err
	}

	idle := watched.read()
	f.Nodes = len(c.Nodes)

	direct, conn, err := directClient(e)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a client connection

	r.logf("runtime %s: %d Version calls per case, fan-out to %v", rt, r.plan.APIDCalls, r.plan.RuntimeFanOut)

	lat, err := r.directVsAPID(ctx, e, direct, versionCall(e.cli.MachineClient, nil))
	if err != nil {
		return err
	}

	f.Direct, f.Via = lat[0], lat[1]

	if f.FanOut, err = r.fanOutCases(ctx, e, r.plan.RuntimeFanOut); err != nil {
		return err
	}

	r.res.Memory = append(r.res.Memory, watched.memory(idle, watched.read())...)

	return nil
}

// runtimeEnv connects to a cluster on rt and finds every node's processes
// (machined, containerd and the shims too) and the control plane's by
// name, which the memory table shows.
func runtimeEnv(ctx context.Context, c *localcluster.Cluster, rt certs.Runtime) (*clusterEnv, watchedProcesses, error) {
	cli, err := c.Client(ctx)
	if err != nil {
		return nil, nil, err
	}

	e := &clusterEnv{c: c, cp: c.ControlPlanes()[0], cli: cli, allProcs: []int{os.Getpid()}}
	role := RoleControlPlane + ", " + string(rt) + " runtime"

	var watched watchedProcesses

	for _, n := range c.Nodes {
		procs, shims, err := runtimeProcesses(n, c.StatePath(n))
		if err != nil {
			return nil, nil, errors.Join(err, cli.Close())
		}

		for _, pid := range procs {
			e.allProcs = append(e.allProcs, pid)
		}

		for _, pid := range shims {
			e.allProcs = append(e.allProcs, pid)
		}

		if n.PID != e.cp.PID {
			continue
		}

		e.cpProcs = procs

		for _, name := range append([]string{"machined", "containerd"}, runtimeServices...) {
			if pid, ok := procs[name]; ok {
				watched = append(watched, watchedProcess{name, role, pid})
			}
		}

		for _, id := range slices.Sorted(mapKeys(shims)) {
			watched = append(watched, watchedProcess{"containerd-shim (" + id + ")", role, shims[id]})
		}
	}

	for _, svc := range runtimeServices {
		if _, ok := e.cpProcs[svc]; !ok {
			return nil, nil, errors.Join(fmt.Errorf("bench: %s of the control plane not found on the %s runtime", svc, rt), cli.Close())
		}
	}

	return e, watched, nil
}

func mapKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// runtimeProcesses finds a node's machined, its children (the services on
// the process runtime, containerd on the containerd one), the shims of the
// node's containerd by container ID, and the services those shims run.
func runtimeProcesses(n localcluster.Node, state string) (procs, shims map[string]int, err error) {
	children, err := childrenOf(n.PID)
	if err != nil {
		return nil, nil, err
	}

	procs, shims = map[string]int{"machined": n.PID}, map[string]int{}

	for _, name := range append([]string{"containerd"}, runtimeServices...) {
		if pid, ok := children[name]; ok {
			procs[name] = pid
		}
	}

	all, err := processesUnder(state)
	if err != nil {
		return nil, nil, err
	}

	for _, p := range all {
		if !strings.HasPrefix(p.comm, "containerd-shim") {
			continue
		}

		id := argAfter(p.args, "-id")
		shims[id] = p.pid

		kids, err := childrenOf(p.pid)
		if err != nil {
			return nil, nil, err
		}

		if pid, ok := kids[id]; ok && slices.Contains(runtimeServices, id) {
			procs[id] = pid
		}
	}

	return procs, shims, nil
}

// argAfter is the argument after flag in args; empty if none.
func argAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}

	return ""
}

// procEntry is a process found by its command line.
type procEntry struct {
	pid  int
	comm string
	args []string
}

// processesUnder lists the live processes one of whose arguments names a
// path under dir: a node's machined (--state), its containerd (--config),
// and the shims (-address), but not the containers, whose command lines
// are their own.
func processesUnder(dir string) ([]procEntry, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}

	prefix := filepath.Clean(dir) + string(filepath.Separator)

	var out []procEntry

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}

		data, err := procFile(pid, "cmdline")
		if err != nil || len(data) == 0 {
			continue // gone meanwhile, or a kernel thread
		}

		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) }) {
			continue
		}

		st, err := readStat(pid)
		if err != nil || st.State == "Z" {
			continue
		}

		out = append(out, procEntry{pid: pid, comm: st.Comm, args: args})
	}

	return out, nil
}
