package scale

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/token"
)

// fleet is the hollow workers and their shared counters.
type fleet struct {
	workers []*worker
	n       *counters
	running sync.WaitGroup // the loops of the workers that joined
}

// joinBase is a worker's join configuration as machined's config gives it:
// every control plane as endpoint, in the config's order, the token and
// the OS CA.
func joinBase(c *localcluster.Cluster) (join.Config, error) {
	now := time.Now()

	bundle, err := certs.LoadBundle(c.SecretsPath(), now)
	if err != nil {
		return join.Config{}, err
	}

	osCA, err := bundle.OSCA(now)
	if err != nil {
		return join.Config{}, err
	}

	cas, err := ca.NewAcceptedSet(now, osCA.Cert)
	if err != nil {
		return join.Config{}, err
	}

	tok, err := token.Parse(bundle.TrustdInfo.Token)
	if err != nil {
		return join.Config{}, err
	}

	var eps []string
	for _, n := range c.ControlPlanes() {
		eps = append(eps, n.Address)
	}

	return join.Config{Endpoints: eps, Token: tok, CAs: cas, CA: osCA.Cert}, nil
}

// storm makes the hollow workers and lets them all join at once, measuring
// the time until the last held its certificate, and the CPU time of the
// control planes' processes and of the harness, whose workers make the
// keys, CSRs and handshakes: the storm's CPU floor is that time over the
// cores, as the join storm of the benchmarks (e2e/bench). Both include the
// first heartbeats and watches of the workers that joined early, which a
// cluster booting at once makes during its storm too.
func (r *run) storm(ctx context.Context) error {
	base, err := joinBase(r.c)
	if err != nil {
		return err
	}

	f := &fleet{n: &counters{}}
	addr := r.cfg.Sources.Masked().Addr()

	for range r.cfg.Workers {
		addr = addr.Next()

		w, err := newWorker(addr.String(), base, f.n, r.log)
		if err != nil {
			return err
		}

		f.workers = append(f.workers, w)
	}

	r.fleet = f
	r.logf("join storm of %d", len(f.workers))

	procs, self := controlPlaneProcesses(r.c), os.Getpid()
	before, selfBefore := cpuByName(procs), cpuOf(self)
	t0 := time.Now()
	failed := f.joinAll(ctx, r.log)
	total, cpu, harness := time.Since(t0), sumCPU(before, cpuByName(procs)), max(cpuOf(self)-selfBefore, 0)
	r.res.Storm = Storm{
		Total: total, CPU: cpu, HarnessCPU: harness, Cores: runtime.NumCPU(),
		Floor: CPUFloor(cpu, harness, runtime.NumCPU()), Failed: failed,
	}
	r.res.Joined = len(f.workers) - failed

	r.logf("join storm: %d joined in %s (CPU floor %s)", r.res.Joined, dur(total), dur(r.res.Storm.Floor))

	if r.res.Joined == 0 {
		return fmt.Errorf("no hollow worker joined")
	}

	return nil
}

// joinAll joins every worker at once, and starts the loops of each
// (renewal, heartbeats, revocation watch) as soon as it holds its
// certificate, as a node does once it joined: the nodes of a cluster that
// boots at once start their heartbeats and watches over the storm, never
// all in the same second after its last join. Those that fail are left
// out of the fleet. It returns how many failed; the loops run until ctx
// ends, and wait waits for them.
func (f *fleet) joinAll(ctx context.Context, log *slog.Logger) int {
	joinCtx, cancel := context.WithTimeout(ctx, stormTimeout)
	defer cancel()

	ok := make([]bool, len(f.workers))

	var wg sync.WaitGroup
	for i, w := range f.workers {
		wg.Go(func() {
			if _, err := w.join(joinCtx); err != nil {
				return
			}

			ok[i] = true

			f.running.Go(func() { _ = w.run(ctx, heartbeatInterval, log) }) //nolint:errcheck // it ends with ctx
		})
	}

	wg.Wait()

	kept := f.workers[:0]
	for i, w := range f.workers {
		if ok[i] {
			kept = append(kept, w)
		}
	}

	failed := len(f.workers) - len(kept)
	f.workers = kept

	return failed
}

// wait waits for the loops of every worker that joined; they end with the
// context joinAll was given.
func (f *fleet) wait() { f.running.Wait() }

// controlPlaneProcesses are every control plane's machined, apid, trustd
// and etcd, keyed "cp1/trustd" (cpN is the node's name).
func controlPlaneProcesses(c *localcluster.Cluster) map[string]int {
	out := map[string]int{}

	for _, n := range c.ControlPlanes() {
		out[n.Name+"/machined"] = n.PID

		for _, pid := range localcluster.Descendants(n.PID) {
			switch name := commOf(pid); name {
			case "apid", "trustd", "etcd":
				out[n.Name+"/"+name] = pid
			}
		}
	}

	return out
}

func cpuByName(procs map[string]int) map[string]time.Duration {
	out := make(map[string]time.Duration, len(procs))
	for k, pid := range procs {
		out[k] = cpuOf(pid)
	}

	return out
}

func sumCPU(before, after map[string]time.Duration) time.Duration {
	var t time.Duration
	for k, v := range after {
		t += max(v-before[k], 0)
	}

	return t
}
