// Command aegis-conformance runs Aegis's conformance suite (package
// e2e/conformance) against a local cluster and prints a table of its cases
// (case, expected, got) and a summary line "N passed, N failed". It exits
// 0 when every case passed, 1 when one failed, 2 when the run could not
// be made.
//
//	aegis-conformance --cluster DIR [flags]   run against the local cluster in DIR
//	aegis-conformance --create [flags]        create a local cluster, run, destroy it
//
// Every address it uses (nodes, its test-only node, its NTP server, the
// source addresses of its trustd callers) is a loopback address of its
// flags, by default in 127.8.0.0/16.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/conformance"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// Exit statuses.
const (
	exitPassed = 0
	exitFailed = 1
	exitError  = 2
)

// createTimeout bounds the creation of a cluster with --create.
const createTimeout = 3 * time.Minute

type options struct {
	cluster, binDir   string
	create            bool
	cidr, sources     string
	probe, ntp, match string
	verbose           bool
	runtime           string
	workers           int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)

	stop()
	os.Exit(code)
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options

	fs := flag.NewFlagSet("aegis-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.cluster, "cluster", "", "`DIR` of the local cluster to run against (localcluster's folder)")
	fs.BoolVar(&o.create, "create", false, "create a local cluster for the run, and destroy it afterwards")
	fs.StringVar(&o.cidr, "cidr", "127.8.0.0/24", "loopback range of the nodes of a cluster made with --create")
	fs.StringVar(&o.runtime, "runtime", string(certs.RuntimeContainerd), "how the nodes of a cluster made with --create run their services: containerd or process")
	fs.IntVar(&o.workers, "workers", 1, "workers of a cluster made with --create")
	fs.StringVar(&o.binDir, "bin-dir", "", "`DIR` of machined, apid and trustd for --create (default: this binary's)")
	fs.StringVar(&o.probe, "probe-address", "127.8.0.200", "free loopback address for the suite's test-only control plane")
	fs.StringVar(&o.ntp, "ntp-address", "127.8.0.201", "loopback address of the suite's NTP server (any free port)")
	fs.StringVar(&o.sources, "sources", "127.8.128.0/17", "loopback range trustd callers use, one address each")
	fs.StringVar(&o.match, "run", "", "run only the cases whose group/name matches this `regexp`")
	fs.BoolVar(&o.verbose, "v", false, "print each case as it ends")

	if err := fs.Parse(args); err != nil {
		return o, err
	}

	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case (o.cluster == "") == !o.create:
		return o, errors.New("give one of --cluster DIR and --create")
	case o.runtime != string(certs.RuntimeContainerd) && o.runtime != string(certs.RuntimeProcess):
		return o, fmt.Errorf("--runtime: %q is not containerd or process", o.runtime)
	case o.workers < 1:
		return o, errors.New("--workers: the suite needs at least one worker")
	}

	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPassed
		}

		fmt.Fprintln(stderr, "aegis-conformance:", err)

		return exitError
	}

	opts, err := o.suiteOptions(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "aegis-conformance:", err)

		return exitError
	}

	if o.create {
		dir, cleanup, err := createCluster(ctx, o, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "aegis-conformance:", err)

			return exitError
		}
		defer cleanup()

		opts.ClusterDir = dir
	}

	results, err := conformance.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "aegis-conformance:", err)

		return exitError
	}

	if conformance.Print(stdout, results) > 0 {
		return exitFailed
	}

	return exitPassed
}

func (o options) suiteOptions(stderr io.Writer) (conformance.Options, error) {
	opts := conformance.Options{ClusterDir: o.cluster, ProbeAddress: o.probe, NTPAddress: o.ntp}

	var err error
	if opts.Sources, err = netip.ParsePrefix(o.sources); err != nil {
		return opts, fmt.Errorf("--sources: %w", err)
	}

	if o.match != "" {
		if opts.Match, err = regexp.Compile(o.match); err != nil {
			return opts, fmt.Errorf("--run: %w", err)
		}
	}

	if o.verbose {
		opts.Progress = stderr
	}

	return opts, nil
}

// createCluster makes a cluster of one control plane and one worker in a
// new temporary folder and returns its folder and the function that
// destroys it.
func createCluster(ctx context.Context, o options, stderr io.Writer) (string, func(), error) {
	cidr, err := netip.ParsePrefix(o.cidr)
	if err != nil {
		return "", nil, fmt.Errorf("--cidr: %w", err)
	}

	binDir := o.binDir
	if binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", nil, err
		}

		binDir = filepath.Dir(exe)
	}

	state, err := os.MkdirTemp("", "aegis-conformance-")
	if err != nil {
		return "", nil, err
	}

	fmt.Fprintf(stderr, "creating a local cluster in %s (%s)\n", state, cidr)

	c, err := localcluster.Create(ctx, localcluster.Options{
		Name: "conformance", ControlPlanes: 1, Workers: o.workers, CIDR: cidr,
		StateDir: state, BinDir: binDir, Timeout: createTimeout, Runtime: certs.Runtime(o.runtime),
	})
	if err != nil {
		os.RemoveAll(state) //nolint:errcheck // our own temporary folder

		return "", nil, err
	}

	cleanup := func() {
		// The suite adds and removes a node of its own; the manifest on
		// disk knows every node there is.
		if loaded, err := localcluster.Load(state, c.Name); err == nil {
			c = loaded
		}

		if err := c.Destroy(); err != nil {
			fmt.Fprintln(stderr, "aegis-conformance: destroying the cluster:", err)
		}

		os.RemoveAll(state) //nolint:errcheck // our own temporary folder
	}

	return c.Dir, cleanup, nil
}
