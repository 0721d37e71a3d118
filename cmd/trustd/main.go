// Command trustd runs Aegis's trustd on its own, outside machined: it signs
// node certificates for callers with a bootstrap token once the node's time
// is synced, and serves the token management API on a Unix socket.
//
//	trustd --config FILE --state DIR [--listen ADDR] [--cert FILE --key FILE] [--cert-ttl D]
//	trustd --node-socket SOCKET --state DIR --listen ADDR [--listen-fd N] [--cert-ttl D]
//	trustd --version
//
// The second form is how machined runs it: the OS CA, the server
// certificate, the accepted CAs, the machine config's token and the
// time-sync status come from machined over SOCKET and follow its updates.
// With the process runtime machined also passes the socket listening on
// ADDR, which it holds across trustd's restarts, as descriptor N.
//
// State lives under DIR: the token store at DIR/trustd/tokens.db, the
// token API socket at DIR/run/trustd/tokens.sock, and the audit trail:
// issuances and token management at DIR/trustd/audit.log, refusals
// (aggregated per source and minute) at DIR/trustd/refusals.log, each
// rotated on its own (audit.log.1 …). Logs are JSON on stderr, audit
// records included with "log":"audit"; --log-format text writes key=value
// lines instead, audit records aside, which stay the JSON of their files;
// --log-level (debug, info, warn or error; default info) sets the least
// severe record logged;
// --metrics-listen ADDR serves Prometheus metrics at http://ADDR/metrics
// (machined passes it when machine.metrics is on). SIGTERM or
// SIGINT stops it gracefully. --pprof-listen 127.0.0.1:PORT serves Go's
// profiles (/debug/pprof/) for performance work: off by default, loopback
// addresses only.
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
	"syscall"
	"time"

	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/pprofserve"
	"github.com/aegis-os/aegis/trustd"
)

// options are the command line.
type options struct {
	config     string
	nodeSocket string
	state      string
	listen     string
	listenFD   int
	cert       string
	key        string
	certTTL    time.Duration
	pprof      string
	// logOut is where the operational log goes (set by run, not a flag).
	logOut io.Writer
	daemonflag.Flags
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if _, pace := tuneGC(os.LookupEnv); pace != nil {
		go pace(ctx)
	}

	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "trustd:", err)
		}

		os.Exit(1)
	}
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
	case (o.config == "") == (o.nodeSocket == ""):
		return o, errors.New("give one of --config and --node-socket")
	case o.state == "":
		return o, errors.New("--state is required")
	case o.nodeSocket != "" && (o.listen == "" || o.cert != ""):
		return o, errors.New("--node-socket needs --listen and takes its certificate from machined")
	case o.listenFD != 0 && o.listen == "":
		return o, errors.New("--listen-fd needs --listen, the address the descriptor listens on")
	case o.listenFD < 0:
		return o, fmt.Errorf("--listen-fd %d: want an inherited descriptor", o.listenFD)
	case (o.cert == "") != (o.key == ""):
		return o, errors.New("--cert and --key go together")
	case o.certTTL < trustd.MinCertTTL || o.certTTL > trustd.MaxCertTTL:
		return o, fmt.Errorf("--cert-ttl %s outside [%s, %s]", o.certTTL, trustd.MinCertTTL, trustd.MaxCertTTL)
	}

	return o, nil
}

// flagSet is trustd's command line, writing usage to stderr; its man page
// is generated from it.
func (o *options) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("trustd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "machine config `FILE` (a control-plane config: it holds the CA key)")
	fs.StringVar(&o.nodeSocket, "node-socket", "", "machined's trustd `SOCKET` to take the node's resources from, instead of --config")
	fs.StringVar(&o.state, "state", "", "state `DIR` (token store, sockets)")
	fs.StringVar(&o.listen, "listen", "", "listen `ADDR`ess (default: the config's listenAddress, port 50001)")
	fs.IntVar(&o.listenFD, "listen-fd", 0, "serve the listening socket inherited as descriptor `N` (it must listen on --listen) instead of opening one; machined passes it")
	fs.StringVar(&o.cert, "cert", "", "server certificate `FILE` (watched for changes; default: issued from the config's CA)")
	fs.StringVar(&o.key, "key", "", "server key `FILE` for --cert")
	fs.DurationVar(&o.certTTL, "cert-ttl", trustd.MaxCertTTL, "lifetime of the node certificates trustd signs (1m to 24h)")
	fs.StringVar(&o.pprof, "pprof-listen", "", "serve Go's CPU and heap profiles at http://`ADDR`/debug/pprof/ (loopback IP:PORT only; default off)")
	o.Register(fs)

	return fs
}

// opsLog is the operational log's writer and level.
func (o options) opsLog() opsLog { return opsLog{w: o.logOut, level: o.Level} }

// run starts trustd and blocks until ctx ends or a component fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	if opts.Version {
		daemonflag.PrintVersion(stdout, "trustd")

		return nil
	}

	log := slog.New(opts.Handler(stderr))
	opts.logOut = stderr

	var d *daemon
	if opts.nodeSocket != "" {
		d, err = setupNode(ctx, opts, log)
	} else {
		d, err = setup(opts, log)
	}

	if err != nil {
		return err
	}
	defer d.close()

	if opts.pprof != "" {
		lis, err := pprofserve.Listen(opts.pprof)
		if err != nil {
			return err
		}

		d.background = append(d.background, func(ctx context.Context) error { return pprofserve.Serve(ctx, lis, log) })
	}

	return d.run(ctx)
}
