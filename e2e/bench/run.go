package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aegis-os/aegis/internal/defaults"
)

// Config configures a run.
type Config struct {
	// BinDir holds the machined, apid, trustd, etcd, cfssl and bareproxy
	// binaries. Required.
	BinDir string
	// Plan is how much load to make. Required.
	Plan Plan
	// Progress receives a line per step. Nil discards.
	Progress io.Writer
	// Keep leaves the run's directory (state and logs of every process)
	// in place instead of removing it.
	Keep bool
	// Only names the stages to run (Stages); empty runs them all.
	Only []string
	// CfsslMigrations is the directory of cfssl's sqlite certificate
	// database migrations (certdb/sqlite/migrations of the cfssl module
	// pinned in go.mod), from which the issuance stage creates the database
	// of the cfssl serve that records what it signs. Required by that stage.
	CfsslMigrations string
}

// Stages are the parts of a run, in the order they run.
var Stages = []string{"issuance", "boot", "cluster", "flood", "etcd", "runtime"}

// run is one run's state.
type run struct {
	cfg   Config
	plan  Plan
	dir   string
	began time.Time
	clean cleanup
	res   Results
}

// stage is one independent part of a run: a failure in one leaves the
// others' figures standing.
type stage struct {
	name string
	fn   func(context.Context) error
}

// Run makes the run's loads and returns its report. Everything it starts
// it stops before returning, when a part fails and when ctx ends (Ctrl-C)
// too. Failed parts are listed in the report's Failures; the error is for
// a run that could not start at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := checkBinaries(cfg.BinDir); err != nil {
		return nil, err
	}

	for _, s := range cfg.Only {
		if !slices.Contains(Stages, s) {
			return nil, fmt.Errorf("bench: no stage %q; the stages are %v", s, Stages)
		}
	}

	cfg.Progress = defaults.Output(cfg.Progress)

	dir, err := os.MkdirTemp("", "aegis-bench-")
	if err != nil {
		return nil, err
	}

	r := &run{cfg: cfg, plan: cfg.Plan, dir: dir, began: time.Now()}
	machine := DescribeMachine()
	r.res.CPUs = machine.CPUs

	failures := r.stages(ctx)

	if err := r.clean.run(); err != nil {
		failures = append(failures, err.Error())
	}

	if cfg.Keep {
		r.logf("state and logs kept in %s", dir)
	} else if err := os.RemoveAll(dir); err != nil {
		failures = append(failures, err.Error())
	}

	machine.LoadAfter = LoadAverage()
	rep := NewReport(cfg.Plan.Name, r.began, machine, r.res)
	rep.Elapsed, rep.Failures = time.Since(r.began), failures

	return rep, nil
}

// stages runs the stages in order and returns what failed.
func (r *run) stages(ctx context.Context) []string {
	var failures []string

	for i, s := range []stage{
		{"issuance", r.issuance},
		{"boot", r.boot},
		{"cluster loads", r.clusterLoads},
		{"connection flood", r.connFlood},
		{"etcd", r.etcd},
		{"runtime", r.runtimes},
	} {
		if len(r.cfg.Only) > 0 && !slices.Contains(r.cfg.Only, Stages[i]) {
			continue
		}

		if ctx.Err() != nil {
			failures = append(failures, s.name+": not run: "+context.Cause(ctx).Error())

			continue
		}

		if err := s.fn(ctx); err != nil {
			r.logf("%s failed: %v", s.name, err)
			failures = append(failures, fmt.Sprintf("%s: %v", s.name, err))
		}
	}

	return failures
}

// start starts a process and puts its stop on the clean-up list.
func (r *run) start(name, logPath, path string, args ...string) (*process, error) {
	p, err := startProcess(name, logPath, path, args...)
	if err != nil {
		return nil, err
	}

	r.clean.push(name, p.stop)

	return p, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "[%6.1fs] %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// Binaries lists what BinDir must hold.
var Binaries = []string{"machined", "apid", "trustd", "etcd", "cfssl", BareProxyBinary}

func checkBinaries(dir string) error {
	var missing []error

	for _, b := range Binaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
			missing = append(missing, fmt.Errorf("bench: binary %s not found in %s", b, dir))
		}
	}

	return errors.Join(missing...)
}
