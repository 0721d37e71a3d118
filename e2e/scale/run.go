// Package scale is the hollow-node harness of `make scale`: a real cluster
// of three control planes (process runtime) and N hollow workers, each the
// worker's own client code (join, renewal, trustdclient, membership,
// revocation) from a loopback address of its own, with no apid, containerd
// or service processes. It measures the join storm, the steady state, a
// revocation's spread, aegisctl's reads and a control plane's restart, and
// compares them with the scale goals (docs/scale.md).
package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// Config is one run of the harness.
type Config struct {
	Workers int
	BinDir  string
	// Dir holds the cluster's state; results go elsewhere.
	Dir string
	// CIDR is the control planes' loopback range; Sources the workers'.
	CIDR, Sources netip.Prefix
	// NodeCertTTL is every node certificate's lifetime: short, so that
	// renewals at half-life happen within the run. Zero means
	// DefaultNodeCertTTL(Workers).
	NodeCertTTL time.Duration
	// Window is the steady-state window.
	Window time.Duration
	// Progress receives one line per step.
	Progress io.Writer
	// Logger receives the hollow workers' logs; nil discards them.
	Logger *slog.Logger
}

// DefaultNodeCertTTL is the node certificates' lifetime for a run of n
// workers: 4 minutes, or 90 ms a worker when that is longer (7.5 minutes
// at 5,000, 15 at 10,000), so that the first certificates reach their
// half-life after the join storm. A storm of 10,000 took 2 min 19 s on
// two cores at best and over 9 minutes at worst; with certificates of 4
// minutes it outlasted the first of them, whose workers were refused
// ("certificate has expired") while their renewals queued behind the
// storm's joins.
func DefaultNodeCertTTL(n int) time.Duration {
	return max(4*time.Minute, time.Duration(n)*90*time.Millisecond)
}

// Run creates the cluster, runs the hollow workers against it, measures,
// and destroys the cluster whatever happens. The results hold what was
// measured even when an error stopped the run; Stopped says where.
func Run(ctx context.Context, cfg Config) (res Results, err error) {
	res = Results{Workers: cfg.Workers, ControlPlanes: ControlPlanes}

	files, err := raiseFileLimit(cfg.Workers)
	if err != nil {
		return res, err
	}

	if cfg.Workers > 1<<(32-cfg.Sources.Bits())-2 {
		return res, fmt.Errorf("scale: %d workers, more than the addresses of %s", cfg.Workers, cfg.Sources)
	}

	if cfg.NodeCertTTL == 0 {
		cfg.NodeCertTTL = DefaultNodeCertTTL(cfg.Workers)
	}

	r := &run{cfg: cfg, res: &res, log: defaults.Logger(cfg.Logger)}
	r.logf("cluster: 3 control planes on %s, node certificates of %s", cfg.CIDR, cfg.NodeCertTTL)

	if need := uint64(cfg.Workers)*filesPerWorker + filesSpare; files < need {
		r.logf("descriptors: %d, fewer than the %d that %d workers may hold: the hard limit could not be raised", files, need, cfg.Workers)
	}

	c, err := localcluster.Create(ctx, localcluster.Options{
		Name: "scale", ControlPlanes: ControlPlanes, CIDR: cfg.CIDR, StateDir: filepath.Join(cfg.Dir, "clusters"),
		BinDir: cfg.BinDir, Timeout: clusterTimeout, NodeCertTTL: cfg.NodeCertTTL,
		// trustd's metrics say why it closed the connections it closed.
		Metrics: true,
	})
	if err != nil {
		return res, fmt.Errorf("scale: creating the cluster: %w", err)
	}
	defer func() { err = errors.Join(err, c.Destroy()) }()

	r.c = c
	err = r.stages(ctx)

	if err != nil && res.Stopped == "" {
		res.Stopped = err.Error()
	}

	return res, err
}

// raiseFileLimit lifts the harness's RLIMIT_NOFILE to what workers hollow
// workers need (filesPerWorker each), the hard limit with it where the
// harness may (as root, up to the kernel's fs.nr_open); where it may not,
// the soft limit to the hard one. It returns the limit set.
func raiseFileLimit(workers int) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("scale: reading RLIMIT_NOFILE: %w", err)
	}

	if need := uint64(workers)*filesPerWorker + filesSpare; l.Max < need {
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: need, Max: need}) == nil {
			return need, nil
		}
	}

	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("scale: raising RLIMIT_NOFILE to %d: %w", l.Max, err)
	}

	return l.Cur, nil
}

// run is one run's state.
type run struct {
	cfg   Config
	res   *Results
	log   *slog.Logger
	c     *localcluster.Cluster
	fleet *fleet
}

func (r *run) logf(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "%s scale: "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, a...)...)
	}
}

// stages runs the measurements in turn; the hollow workers stop at the end.
func (r *run) stages(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	r.idle(ctx)

	// The workers that joined run until the stages end.
	defer func() {
		cancel()

		if r.fleet != nil {
			r.fleet.wait()
		}
	}()

	if err := r.storm(ctx); err != nil {
		return fmt.Errorf("join storm: %w", err)
	}

	for _, s := range []struct {
		name string
		fn   func(context.Context) error
	}{{"steady state", r.steady}, {"revocation", r.revocation}, {"aegisctl", r.cli}, {"control plane killed", r.failover}} {
		r.logf("%s", s.name)

		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}

	return nil
}

// idle measures the control planes' CPU before any worker joined.
func (r *run) idle(ctx context.Context) {
	procs := controlPlaneProcesses(r.c)
	before, t0 := cpuByName(procs), time.Now()

	if sleep(ctx, idleWindow) {
		r.res.Steady.IdleCPU = sumCPU(before, cpuByName(procs)).Seconds() / time.Since(t0).Seconds()
		r.logf("idle cluster: %s of a core", pct(r.res.Steady.IdleCPU))
	}
}
