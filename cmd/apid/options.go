package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/internal/wire"
)

// options are apid's command line.
type options struct {
	certPath, keyPath       string
	impCertPath, impKeyPath string
	caPath                  string
	socket                  string
	nodeSocket              string
	healthSocket            string
	listen                  string
	listenFD                int
	pprof                   string
	self                    []string
	names                   []string
	role                    string
	watchInterval           time.Duration
	shutdownTimeout         time.Duration
	daemonflag.Flags
}

// Defaults of the command line.
const (
	// defaultWatchInterval is how often certificate and CA files are
	// checked for replacement: node certificates live 24 hours and are
	// renewed at half-life, so seconds of delay cost nothing.
	defaultWatchInterval = 10 * time.Second
	// defaultShutdownTimeout is how long open calls may run on after
	// SIGTERM before they are cut; follows never end by themselves.
	defaultShutdownTimeout = 10 * time.Second
)

// errUsage marks a bad command line (exit status 2).
var errUsage = errors.New("usage")

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := o.flagSet(stderr)

	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}

	if o.Version {
		return o, nil
	}

	if err := o.check(fs.NArg()); err != nil {
		fs.Usage()

		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}

	return o, nil
}

// flagSet is apid's command line, writing usage to stderr; its man page
// is generated from it.
func (o *options) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("apid", flag.ContinueOnError)
	fs.SetOutput(stderr)

	fs.StringVar(&o.certPath, "cert", "", "server certificate `FILE` (PEM), reloaded when replaced")
	fs.StringVar(&o.keyPath, "key", "", "server key `FILE` (PEM)")
	fs.StringVar(&o.impCertPath, "impersonator-cert", "", "os:impersonator client certificate `FILE` for forwarding; without it, no forwarding")
	fs.StringVar(&o.impKeyPath, "impersonator-key", "", "key `FILE` of the impersonator certificate")
	fs.StringVar(&o.caPath, "ca", "", "`FILE` of the accepted CAs (PEM), reloaded when replaced")
	fs.StringVar(&o.socket, "machined-socket", "", "machined's Unix `SOCKET`")
	fs.StringVar(&o.nodeSocket, "node-socket", "", "machined's apid `SOCKET` to take certificates and CAs from, instead of the files")
	fs.StringVar(&o.healthSocket, "health-socket", "", "serve the health service on this Unix `SOCKET` too (mode 0600), for a supervisor's probe: there it needs no slot of the listener, which anonymous callers may hold")
	fs.StringVar(&o.listen, "listen", ":"+strconv.Itoa(wire.APIDPort), "`ADDR`ess to listen on")
	fs.IntVar(&o.listenFD, "listen-fd", 0, "serve the listening socket inherited as descriptor `N` (it must listen on --listen) instead of opening one; machined passes it")
	fs.Var((*stringList)(&o.self), "self", "a name or address clients use for this node (repeatable)")
	fs.Var((*stringList)(&o.names), "node-name", "a control-plane endpoint (DNS name or address) clients may route to (repeatable); other nodes must be live members")
	fs.StringVar(&o.role, "role", "", "this node's role, controlplane or worker (file mode; --node-socket reads it from machined); calls carrying secrets are refused without it")
	fs.StringVar(&o.pprof, "pprof-listen", "", "serve Go's CPU and heap profiles at http://`ADDR`/debug/pprof/ (loopback IP:PORT only; default off)")
	fs.DurationVar(&o.watchInterval, "watch-interval", defaultWatchInterval, "how often files are checked for replacement")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "grace period for open calls on SIGTERM")
	o.Register(fs)

	return fs
}

func (o *options) check(extra int) error {
	switch {
	case extra > 0:
		return errors.New("apid takes no arguments")
	case o.socket == "":
		return errors.New("--machined-socket is required")
	case o.nodeSocket != "" && (o.certPath != "" || o.keyPath != "" || o.caPath != "" || o.impCertPath != ""):
		return errors.New("--node-socket replaces --cert, --key, --ca and the impersonator files")
	case o.nodeSocket == "" && (o.certPath == "" || o.keyPath == "" || o.caPath == ""):
		return errors.New("--cert, --key and --ca are required (or --node-socket)")
	case (o.impCertPath == "") != (o.impKeyPath == ""):
		return errors.New("--impersonator-cert and --impersonator-key go together")
	case o.nodeSocket != "" && o.role != "":
		return errors.New("--node-socket replaces --role")
	case o.role != "" && o.role != "controlplane" && o.role != "worker":
		return fmt.Errorf("--role %q: want controlplane or worker", o.role)
	case o.listenFD < 0:
		return fmt.Errorf("--listen-fd %d: want an inherited descriptor", o.listenFD)
	case o.watchInterval <= 0 || o.shutdownTimeout < 0:
		return errors.New("--watch-interval must be positive and --shutdown-timeout not negative")
	}

	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return fmt.Errorf("--listen: %w", err)
	}

	return nil
}

// listener is the socket inherited as --listen-fd, which must listen on
// --listen, or a new one on --listen.
func (o *options) listener() (net.Listener, error) {
	if o.listenFD != 0 {
		return inherit.Listener(o.listenFD, o.listen)
	}

	return net.Listen("tcp", o.listen)
}

// selfNames are the names that mean this node: the --self values, and the
// listen address; when apid listens on every address, every address of the
// host's interfaces (hostAddrs), so that a worker still serves a client
// that names it by any of them.
func (o *options) selfNames(bound net.Addr, hostAddrs func() ([]net.Addr, error)) []string {
	names := append([]string(nil), o.self...)

	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return names
	}

	ip := net.ParseIP(host)
	if ip != nil && !ip.IsUnspecified() {
		return append(names, bound.String(), host)
	}

	addrs, err := hostAddrs()
	if err != nil {
		return names
	}

	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			names = append(names, n.IP.String(), net.JoinHostPort(n.IP.String(), port))
		}
	}

	return names
}
