// Command aegis-talos-suite runs Talos's own API integration suite and the
// real talosctl against an Aegis cluster (package e2e/talossuite). It
// builds both from the Talos module (cached under --out), creates a local
// cluster or uses one, runs the tests the expectation file serves and the
// commands of the guide's talosctl table, destroys a cluster it created,
// and prints a table per suite. It exits 0 when every served test and
// every talosctl command passed and the expectation file lists exactly
// the suite's tests, 1 otherwise, 2 when the run could not be made.
//
//	aegis-talos-suite --create [flags]        create a cluster, run, destroy it
//	aegis-talos-suite --cluster DIR [flags]   run against the local cluster in DIR
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
	"regexp"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/talossuite"
)

// Exit statuses.
const (
	exitPassed = 0
	exitFailed = 1
	exitError  = 2
)

type options struct {
	cluster, binDir, out       string
	create, buildOnly, verbose bool
	skipTalosctl               bool
	cidr, runtime              string
	controlPlanes, workers     int
	talosVersion, expect       string
	guide, match               string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)

	stop()
	os.Exit(code)
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options

	fs := flag.NewFlagSet("aegis-talos-suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.cluster, "cluster", "", "`DIR` of the local cluster to run against (localcluster's folder)")
	fs.BoolVar(&o.create, "create", false, "create a local cluster for the run, and destroy it afterwards")
	fs.StringVar(&o.cidr, "cidr", "127.9.40.0/24", "loopback range of the nodes of a cluster made with --create")
	fs.StringVar(&o.runtime, "runtime", string(certs.RuntimeContainerd), "how the nodes of a cluster made with --create run their services: containerd or process")
	fs.IntVar(&o.controlPlanes, "control-planes", 3, "control planes of a cluster made with --create")
	fs.IntVar(&o.workers, "workers", 2, "workers of a cluster made with --create")
	fs.StringVar(&o.binDir, "bin-dir", "bin", "`DIR` of Aegis's binaries")
	fs.StringVar(&o.out, "out", "_out/talos-suite", "`DIR` of the build cache, the logs and the report")
	fs.StringVar(&o.talosVersion, "talos-version", "v1.11.5", "version of "+talossuite.TalosModule+" to build the suite and talosctl from")
	fs.StringVar(&o.expect, "expect", "e2e/talossuite/expect.txt", "the expectation `FILE`: which tests Aegis serves")
	fs.StringVar(&o.guide, "guide", "docs/guide/talosctl.md", "the guide whose talosctl table the talosctl stage runs")
	fs.StringVar(&o.match, "run", "", "run only the served tests whose Suite/Test matches this `regexp` (drift is then not checked)")
	fs.BoolVar(&o.buildOnly, "build-only", false, "build (or find cached) the suite and talosctl, then stop")
	fs.BoolVar(&o.skipTalosctl, "skip-talosctl", false, "leave out the talosctl stage")
	fs.BoolVar(&o.verbose, "v", false, "print each test and command as it ends")

	if err := fs.Parse(args); err != nil {
		return o, err
	}

	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case !o.buildOnly && (o.cluster == "") == !o.create:
		return o, errors.New("give one of --cluster DIR and --create (or --build-only)")
	case o.runtime != string(certs.RuntimeContainerd) && o.runtime != string(certs.RuntimeProcess):
		return o, fmt.Errorf("--runtime: %q is not containerd or process", o.runtime)
	}

	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPassed
		}

		fmt.Fprintln(stderr, "aegis-talos-suite:", err)

		return exitError
	}

	report, err := o.execute(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "aegis-talos-suite:", err)

		return exitError
	}

	if o.buildOnly {
		return exitPassed
	}

	report.Print(stdout)

	if err := o.writeReport(report); err != nil {
		fmt.Fprintln(stderr, "aegis-talos-suite:", err)

		return exitError
	}

	fmt.Fprintf(stdout, "report: %s, %s; each test's output under %s\n",
		filepath.Join(o.out, "report.md"), filepath.Join(o.out, "report.json"), filepath.Join(o.out, "logs"))

	if len(report.Problems()) > 0 {
		return exitFailed
	}

	return exitPassed
}

// execute builds, checks the expectation file, and runs both stages.
func (o options) execute(ctx context.Context, stderr io.Writer) (talossuite.Report, error) {
	report := talossuite.Report{TalosVersion: o.talosVersion}

	expect, err := readExpectations(o.expect)
	if err != nil {
		return report, err
	}

	bins, err := o.build(ctx, stderr, &report)
	if err != nil || o.buildOnly {
		return report, err
	}

	if err := o.drift(expect, bins, &report); err != nil {
		return report, err
	}

	c, cleanup, err := o.openCluster(ctx, stderr)
	if err != nil {
		return report, err
	}
	defer cleanup()

	start := time.Now()

	if err := o.runStages(ctx, stderr, c, bins, expect, &report); err != nil {
		return report, err
	}

	report.RunSeconds = time.Since(start).Seconds()

	return report, nil
}

func (o options) build(ctx context.Context, stderr io.Writer, report *talossuite.Report) (talossuite.Binaries, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return talossuite.Binaries{}, err
	}

	logPath := filepath.Join(o.out, "build.log")

	logFile, err := os.Create(logPath)
	if err != nil {
		return talossuite.Binaries{}, err
	}
	defer logFile.Close()

	fmt.Fprintf(stderr, "building Talos %s's integration suite and talosctl (cached under %s; log %s)\n", o.talosVersion, o.out, logPath)

	ctx, cancel := context.WithTimeout(ctx, talossuite.BuildTimeout)
	defer cancel()

	start := time.Now()

	bins, err := talossuite.Build(ctx, talossuite.BuildOptions{Version: o.talosVersion, Dir: filepath.Join(o.out, "build"), Log: logFile})
	if err != nil {
		return bins, fmt.Errorf("%w (see %s)", err, logPath)
	}

	if !bins.Cached {
		report.BuildSeconds = time.Since(start).Seconds()
	}

	fmt.Fprintf(stderr, "built in %s (cached: %t): %s, %s\n", time.Since(start).Round(time.Second), bins.Cached, bins.Integration, bins.Talosctl)

	return bins, nil
}

// drift compares the expectation file with the suite's source; with --run
// only part of the file is meant, so the drift is not checked.
func (o options) drift(expect talossuite.Expectations, bins talossuite.Binaries, report *talossuite.Report) error {
	if o.match != "" {
		return nil
	}

	tests, err := talossuite.SourceTests(bins.Source)
	if err != nil {
		return err
	}

	report.Drift = expect.Drift(tests)

	return nil
}

func readExpectations(path string) (talossuite.Expectations, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	return talossuite.ParseExpectations(f, path)
}

// filter keeps the served tests that match --run; the rest become skipped.
func (o options) filter(expect talossuite.Expectations) (talossuite.Expectations, error) {
	if o.match == "" {
		return expect, nil
	}

	re, err := regexp.Compile(o.match)
	if err != nil {
		return nil, fmt.Errorf("--run: %w", err)
	}

	out := make(talossuite.Expectations, 0, len(expect))

	for _, e := range expect {
		if e.Status == talossuite.Serve && !re.MatchString(e.Test) {
			e.Status, e.Reason = talossuite.Skip, "not matched by --run"
		}

		out = append(out, e)
	}

	return out, nil
}

func (o options) writeReport(r talossuite.Report) error {
	md, err := os.Create(filepath.Join(o.out, "report.md"))
	if err != nil {
		return err
	}

	r.Markdown(md)

	if err := md.Close(); err != nil {
		return err
	}

	js, err := os.Create(filepath.Join(o.out, "report.json"))
	if err != nil {
		return err
	}

	if err := r.JSON(js); err != nil {
		js.Close() //nolint:errcheck // the encoding error is the one to report

		return err
	}

	return js.Close()
}
