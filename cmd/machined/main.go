// Command machined runs an Aegis node as an ordinary process: it validates
// the machine config, then runs the boot sequence (time service, the node
// certificates it holds, apid everywhere and trustd on control planes, the
// certificates service that waits for time sync to issue and renew) and
// serves the MachineService to apid, until SIGTERM, SIGINT, a Shutdown or
// a Reset call; after a Reset that asks for a reboot it executes itself
// again with the same arguments. After an upgrade (MachineService.Upgrade)
// the node keeps its versions in slots under DIR/upgrade: machined started
// from anywhere runs the active slot's machined (executing it, with that
// slot's --bin-dir and --image-dir), and a version on trial that is not
// healthy within --upgrade-trial (5s to 30m, default 2m), or that starts
// three times without becoming so, is replaced by the version kept. With
// the process runtime, machined holds apid's and trustd's listening
// sockets and hands them to the machined it executes (AEGIS_LISTENERS), so
// that clients' connections wait through a switch instead of being refused.
//
//	machined --config FILE --state DIR [--bin-dir DIR] [--image-dir DIR] [--node-cert-ttl D] [--heartbeat-interval D] [--upgrade-trial D] [--log-level LEVEL] [--log-format json|text] [--metrics-listen ADDR]
//	machined --version
//
// The whole node lives under DIR. A config with errors is refused with every
// error listed, before anything is started or written. apid and trustd are
// run from --bin-dir, by default the directory of machined's own binary.
// --node-cert-ttl (1m to 24h, default 24h) is the lifetime of the node's own
// certificates and, on a control plane, of those its trustd signs; short
// lifetimes are for tests of renewal. --heartbeat-interval (1s to 5m,
// default 10s) is how often the node refreshes its entry in the cluster's
// member list; short intervals are for tests of the age-out. --log-level (debug, info, warn or
// error; default info) and --log-format (json, the default, or text) apply
// to machined and to the apid and trustd it starts (etcd gets its own
// console format for text); machined's own log file
// under DIR stays JSON, which the node's tools read back. --metrics-listen serves machined's Prometheus metrics at
// http://ADDR/metrics; without it, the config's machine.metrics decides
// (port 9101 on the listen address), and it also turns on apid's (9102)
// and trustd's (9103).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/node"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/machined/upgrade"
	"github.com/aegis-os/aegis/trustd"
)

type options struct {
	config, state, binDir string
	imageDir              string
	nodeCertTTL           time.Duration
	trialTimeout          time.Duration
	heartbeat             time.Duration
	daemonflag.Flags
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The listening sockets of apid and trustd: the node holds them while
	// it runs, and a switch of versions passes them on.
	held := &inherit.Set{}
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, held)

	switch {
	case errors.Is(err, node.ErrRebootAfterReset):
		stop()
		err = reexec()
	case errors.Is(err, node.ErrSwitchVersion):
		stop()
		err = switchSlot(stateDir(os.Args[1:]), held)
	}

	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "machined:", err)
		}

		os.Exit(1)
	}
}

// reexec starts machined again in this process, with the same arguments,
// after a reset that asked for a reboot: the new process boots from the
// kept config into the wiped state directory, holding nothing of the old
// one. It returns only if it cannot.
func reexec() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("booting again after the reset: %w", err)
	}

	return fmt.Errorf("booting again after the reset: %w", syscall.Exec(exe, os.Args, os.Environ())) //nolint:gosec // machined's own binary and arguments
}

// stateDir is the --state of args, made absolute as run made it; empty
// when it cannot be read (run refused the arguments before).
func stateDir(args []string) string {
	opts, err := parseFlags(args, io.Discard)
	if err != nil {
		return ""
	}

	return opts.state
}

// flagSet is machined's command line, writing usage to stderr; its man
// page is generated from it.
func (o *options) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("machined", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "machine config `FILE`")
	fs.StringVar(&o.state, "state", "", "state `DIR`ectory of the node")
	fs.StringVar(&o.binDir, "bin-dir", "", "`DIR`ectory of the apid and trustd binaries (default: machined's own)")
	fs.StringVar(&o.imageDir, "image-dir", "", "`DIR`ectory of the image archives of apid, trustd and etcd, for the containerd runtime (default: BIN-DIR/images)")
	fs.DurationVar(&o.nodeCertTTL, "node-cert-ttl", node.NodeCertTTL, "lifetime of the node certificates this node issues or has trustd sign (1m to 24h)")
	fs.DurationVar(&o.trialTimeout, "upgrade-trial", upgrade.TrialTimeout, "how long a new version has to become healthy before the node goes back to the one it kept (5s to 30m)")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", membership.DefaultInterval, "how often the node refreshes its membership entry (1s to 5m); it ages out after three intervals")
	o.Register(fs)

	return fs
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options

	fs := o.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}

	switch {
	case o.Version:
		return o, nil
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.config == "" || o.state == "":
		return o, errors.New("--config and --state are required")
	case o.nodeCertTTL < trustd.MinCertTTL || o.nodeCertTTL > trustd.MaxCertTTL:
		return o, fmt.Errorf("--node-cert-ttl %s outside [%s, %s]", o.nodeCertTTL, trustd.MinCertTTL, trustd.MaxCertTTL)
	case o.trialTimeout < upgrade.MinTrialTimeout || o.trialTimeout > upgrade.MaxTrialTimeout:
		return o, fmt.Errorf("--upgrade-trial %s outside [%s, %s]", o.trialTimeout, upgrade.MinTrialTimeout, upgrade.MaxTrialTimeout)
	}

	// The services run with their own working directory: every path they
	// get is absolute.
	var err error
	if o.state, err = filepath.Abs(o.state); err != nil {
		return o, err
	}

	if o.config, err = filepath.Abs(o.config); err != nil {
		return o, err
	}

	if o.binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("finding the binaries: %w (give --bin-dir)", err)
		}

		o.binDir = filepath.Dir(exe)
	}

	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return o, err
	}

	return o, nil
}

// run runs the node of args until it ends. held receives the listening
// sockets a machined of another version handed over (slots.go) and those
// the node opens; run closes them, but when it returns
// node.ErrSwitchVersion.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, held *inherit.Set) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	if opts.Version {
		daemonflag.PrintVersion(stdout, "machined")

		return nil
	}

	// Everything is checked before anything is created.
	cfg, err := certs.LoadMachineConfig(opts.config, time.Now())
	if err != nil {
		return err
	}

	// The version the node runs is the active slot's, after an upgrade.
	slot, decision, err := chooseSlot(&opts, time.Now())
	if err != nil {
		return err
	}

	if err := adoptListeners(held); err != nil {
		return err
	}

	for _, bin := range []string{"apid", "trustd"} {
		if _, err := os.Stat(filepath.Join(opts.binDir, bin)); err != nil {
			return fmt.Errorf("binary %s not found in %s (give --bin-dir): %w", bin, opts.binDir, err)
		}
	}

	if err = os.MkdirAll(opts.state, 0o700); err != nil {
		return err
	}

	own, err := logs.Open(filepath.Join(opts.state, "logs", "machined.log"), node.MaxServiceLog)
	if err != nil {
		return err
	}
	defer own.Close()

	// machined.log stays JSON whatever --log-format says: the node's
	// tools read it back (a cluster's boot stage, crash loops).
	log := slog.New(opts.Handler(io.MultiWriter(stderr, own)))
	if opts.Format == daemonflag.FormatText {
		log = slog.New(slog.NewMultiHandler(opts.Handler(stderr), opts.JSONHandler(own)))
	}

	if addrs := held.Addrs(); len(addrs) > 0 {
		log.Info("listening sockets handed over by the previous machined", slog.Any(logkey.Listen, addrs))
	}

	// --metrics-listen wins over the config's machine.metrics for machined
	// itself; apid and trustd follow the config.
	addr := opts.MetricsListen
	if addr == "" {
		addr = cfg.MetricsListen("machined")
	}

	reg, endpoint, err := metrics.Open(addr, log)
	if err != nil {
		return err
	}
	defer endpoint.Close() //nolint:errcheck // closed by Serve already, or never served

	n, err := node.New(node.Config{
		ConfigPath: opts.config, Machine: cfg, State: opts.state, BinDir: opts.binDir, ImageDir: opts.imageDir,
		MachinedLog: own, Logger: log, LogLevel: opts.Level, LogFormat: opts.Format, NodeCertTTL: opts.nodeCertTTL, Metrics: reg,
		HeartbeatInterval: opts.heartbeat, Slot: slot, StartDecision: decision, Listeners: held,
	})
	if err != nil {
		held.Close()

		return err
	}

	served := make(chan struct{})
	mctx, stopMetrics := context.WithCancel(ctx)

	go func() {
		defer close(served)

		if err := endpoint.Serve(mctx); err != nil {
			log.Error("metrics endpoint stopped", slog.String(logkey.Error, err.Error()))
		}
	}()

	err = n.Run(ctx)

	stopMetrics()
	<-served

	return err
}
