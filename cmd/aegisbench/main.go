// Command aegisbench is Aegis's benchmark harness: it runs trustd, apid and
// machined as real processes on loopback addresses of 127.7.0.0/16, loads
// them, prints a table of the figures, and writes them as JSON and into a
// Markdown document.
//
//	aegisbench [--quick] [--bin-dir DIR] [--cfssl-migrations DIR] [--json FILE] [--doc FILE] [--revision REV] [--keep] [--cpuprofile FILE]
//	aegisbench --from FILE [--doc FILE]
//
// The goals are drawn as an SVG chart next to the results file and in a
// folder next to the document named as it is (docs/benchmarks.md embeds
// docs/benchmarks/goals.svg). With --from, nothing runs: the table, the
// document and the charts are made again from a results file written by
// --json. The last line printed counts the goals met and missed.
//
// It stops everything it started before it exits, on Ctrl-C too. The exit
// status is 1 when a part of the run failed; the figures of the other parts
// are still printed and written.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/aegis-os/aegis/e2e/bench"
)

type options struct {
	quick      bool
	binDir     string
	jsonPath   string
	docPath    string
	revision   string
	keep       bool
	cpuProfile string
	only       []string
	migrations string
	from       string
}

func main() {
	// The connection-flood stage runs its flood in a process of its own:
	// this binary again.
	if bench.FloodChild() {
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "aegisbench:", err)
		}

		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options

	fs := flag.NewFlagSet("aegisbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "fewer repetitions, every case and node count kept (about a minute)")
	fs.StringVar(&o.binDir, "bin-dir", "", "`DIR` of machined, apid, trustd, etcd, cfssl and bareproxy (default: aegisbench's own)")
	fs.StringVar(&o.migrations, "cfssl-migrations", "", "`DIR` of cfssl's certdb/sqlite/migrations, from which the certificate database of cfssl serve is created")
	fs.StringVar(&o.jsonPath, "json", "", "write the figures as JSON to `FILE`")
	fs.StringVar(&o.docPath, "doc", "", "put the results between the markers of the Markdown `FILE` (a new file holds only them)")
	fs.StringVar(&o.revision, "revision", "", "the source `REV`ision measured, for the report")
	fs.StringVar(&o.from, "from", "", "run nothing: print and write again the report of the results `FILE` written by --json")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's state and logs in its temporary directory")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the harness's own CPU profile (the clients' side) to `FILE`")
	fs.Func("only", "run only these `STAGES`, comma-separated, of "+strings.Join(bench.Stages, ", "), func(v string) error {
		o.only = append(o.only, strings.Split(v, ",")...)

		return nil
	})

	if err := fs.Parse(args); err != nil {
		return o, err
	}

	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	if o.binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("finding the binaries: %w (give --bin-dir)", err)
		}

		o.binDir = filepath.Dir(exe)
	}

	var err error
	o.binDir, err = filepath.Abs(o.binDir)

	return o, err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	if opts.cpuProfile != "" {
		stopProfile, err := startProfile(opts.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}

	rep, err := report(ctx, opts, stderr)
	if err != nil {
		return err
	}

	if err = write(rep, opts, stdout); err != nil {
		return err
	}

	fmt.Fprintln(stdout, rep.GoalSummary())

	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d part(s) of the run failed; see the end of the table", len(rep.Failures))
	}

	return nil
}

// report runs the benchmarks, or reads the results file of --from.
func report(ctx context.Context, opts options, stderr io.Writer) (*bench.Report, error) {
	if opts.from != "" {
		return readReport(opts.from)
	}

	plan := bench.FullPlan
	if opts.quick {
		plan = bench.QuickPlan
	}

	rep, err := bench.Run(ctx, bench.Config{
		BinDir: opts.binDir, Plan: plan, Progress: stderr, Keep: opts.keep, Only: opts.only, CfsslMigrations: opts.migrations,
	})
	if err != nil {
		return nil, err
	}

	rep.Revision = opts.revision

	return rep, nil
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}

	if err = pprof.StartCPUProfile(f); err != nil {
		f.Close()

		return nil, err
	}

	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
