package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// clusterFlags are the flags every cluster command shares.
type clusterFlags struct {
	name     string
	stateDir string
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.name, "name", localcluster.DefaultName, "name of the cluster")
	cmd.Flags().StringVar(&f.stateDir, "state-dir", "", "folder of the local clusters (default ~/.aegis/clusters)")
	//nolint:errcheck // the flag exists
	cmd.RegisterFlagCompletionFunc("name", completeClusterName)
}

func (f *clusterFlags) dir() (string, error) {
	if f.stateDir != "" {
		return f.stateDir, nil
	}

	return localcluster.DefaultStateDir()
}

// load reads the named cluster from the state dir.
func (f *clusterFlags) load() (*localcluster.Cluster, error) {
	dir, err := f.dir()
	if err != nil {
		return nil, err
	}

	return localcluster.Load(dir, f.name)
}

func newClusterCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local cluster of nodes on loopback addresses",
	}

	cmd.AddCommand(newClusterCreateCommand(e), newClusterShowCommand(e), newClusterDestroyCommand(e), newClusterReadmitCommand(e))

	return cmd
}

func newClusterCreateCommand(e *env) *cobra.Command {
	var (
		flags   clusterFlags
		opts    localcluster.Options
		cidr    string
		binDir  string
		timeout time.Duration
		rt      string
	)

	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a local cluster: one machined per node, each on its own loopback address",
		Long: `Create a local cluster: generate its secrets and configs, start one machined
per node (control planes first, node i at address .(i+2) of --cidr, standard
ports 50000 and 50001), wait until every node's services are up and every
worker has joined through trustd, and merge a context named after the cluster
into the client config. The nodes keep running after aegisctl exits; stop
them with 'aegisctl cluster destroy'.

With --network netns (root), each node runs in a network namespace of its
own (PREFIX-controlplane-1, …) with its address on eth0, the end of a veth
pair whose other end (PREFIX-0, …) is on a bridge (PREFIX-br) here, which
holds the subnet's .1 address: the nodes talk over real interfaces, and
aegisctl reaches them through the bridge. destroy removes every namespace
and link of the prefix; so does a create that fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				prefix netip.Prefix
				err    error
			)

			if cidr != "" {
				if prefix, err = netip.ParsePrefix(cidr); err != nil {
					return fmt.Errorf("--cidr: %w", err)
				}
			}

			if opts.StateDir, err = flags.dir(); err != nil {
				return err
			}

			if opts.BinDir, err = binaries(binDir); err != nil {
				return err
			}

			if opts.ClientConfig, err = e.clientConfigPath(); err != nil {
				return err
			}

			switch certs.Runtime(rt) {
			case certs.RuntimeContainerd, certs.RuntimeProcess:
				opts.Runtime = certs.Runtime(rt)
			default:
				return fmt.Errorf("--runtime: %q is not containerd or process", rt)
			}

			opts.Name, opts.CIDR, opts.Timeout, opts.Progress = flags.name, prefix, timeout, e.stdout

			return createCluster(cmd.Context(), e, opts, flags.stateDir)
		},
	}

	flags.register(cmd)
	cmd.Flags().IntVar(&opts.ControlPlanes, "controlplanes", 1, "number of control-plane nodes")
	cmd.Flags().IntVar(&opts.Workers, "workers", 2, "number of worker nodes")
	cmd.Flags().StringVar(&cidr, "cidr", "", "range of the node addresses (default "+localcluster.DefaultCIDR+", or "+localcluster.DefaultNetnsCIDR+" with --network netns)")
	cmd.Flags().StringVar(&opts.Network, "network", localcluster.NetworkLoopback, "loopback: nodes on loopback addresses; netns: each node in its own network namespace, on a bridge (root)")
	cmd.Flags().StringVar(&opts.NetnsPrefix, "netns-prefix", "", "with --network netns: prefix of every namespace and link made, at most 12 characters (default: the cluster's name)")
	cmd.Flags().StringVar(&binDir, "bin-dir", "", "folder of machined, apid and trustd (default: aegisctl's own)")
	cmd.Flags().DurationVar(&timeout, "wait-timeout", localcluster.DefaultTimeout, "how long to wait for the cluster to come up")
	cmd.Flags().BoolVar(&opts.Metrics, "metrics", false, "serve every node's Prometheus metrics (machine.metrics: machined :9101, apid :9102, trustd :9103)")
	cmd.Flags().StringVar(&rt, "runtime", string(certs.RuntimeContainerd),
		"how nodes run apid, trustd and etcd: containerd (confined containers; needs root, containerd and runc) or process")

	return cmd
}

func createCluster(ctx context.Context, e *env, opts localcluster.Options, stateDirFlag string) error {
	// A closed output (aegisctl cluster create | head) must not kill aegisctl
	// halfway, with nodes started and nothing recorded: write errors are
	// ignored instead until the cluster is up or undone. An interrupt
	// cancels ctx, and Create then undoes what it made.
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Reset(syscall.SIGPIPE)

	where := "on loopback"
	if opts.Network == localcluster.NetworkNetns {
		where = "in network namespaces"
	}

	fmt.Fprintf(e.stdout, "creating cluster %q: %d control plane(s), %d worker(s) %s\n", opts.Name, opts.ControlPlanes, opts.Workers, where)

	start := e.clock.Now()

	c, err := localcluster.Create(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: cluster %q was not created, and what was started is stopped and removed", opts.Name)
		}

		return err
	}

	fmt.Fprintf(e.stdout, "\ncluster %q is up in %.1fs\n\n", c.Name, e.clock.Now().Sub(start).Seconds())
	printNodes(e, c)

	fmt.Fprint(e.stdout, nextSteps(program(), c.Name, c.Addresses(), opts.ClientConfig, e.aegisconfig, stateDirFlag))

	return nil
}

// program is aegisctl as it was run: bin/aegisctl when run by its path,
// so that the commands suggested work as printed.
func program() string {
	if strings.Contains(os.Args[0], "/") {
		return os.Args[0]
	}

	return "aegisctl"
}

// nextSteps is what cluster create suggests once the cluster is up. The
// commands start with prog, and carry --aegisconfig and --state-dir when
// they were given, so they work as printed.
func nextSteps(prog, name string, addresses []string, clientConfig, aegisconfig, stateDir string) string {
	prog = shellQuote(prog)

	ctl := prog
	if aegisconfig != "" {
		ctl += " --aegisconfig " + shellQuote(aegisconfig)
	}

	cluster := "--name " + name
	if stateDir != "" {
		cluster += " --state-dir " + shellQuote(stateDir)
	}

	all := strings.Join(addresses, ",")

	return fmt.Sprintf(`
context %q merged into %s and made current. Try:

  %[3]s -n %[4]s version
  %[3]s -n %[5]s memory
  %[3]s -n %[5]s services
  %[3]s -n %[4]s logs apid
  %[3]s health
  %[7]s cluster show %[6]s
  %[7]s cluster destroy %[6]s
`, name, clientConfig, ctl, addresses[0], all, cluster, prog)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}

	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newClusterShowCommand(e *env) *cobra.Command {
	var (
		flags      clusterFlags
		addresses  bool
		prometheus bool
	)

	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the nodes of a local cluster and whether they run",
		Args:  cobra.NoArgs,
	}

	format := addDocumentFlag(cmd)

	cmd.RunE = func(*cobra.Command, []string) error {
		c, err := flags.load()
		if err != nil {
			return err
		}

		switch {
		case addresses:
			fmt.Fprintln(e.stdout, strings.Join(c.Addresses(), ","))
		case prometheus:
			return writeScrapeConfig(e, c)
		case *format != formatTable:
			return writeDocument(e.stdout, *format, clusterDocument(c))
		default:
			fmt.Fprintf(e.stdout, "cluster %q in %s\n", c.Name, c.Dir)

			if c.Net != nil {
				fmt.Fprintf(e.stdout, "network namespaces %s-…, bridge %s holding %s\n", c.Net.Prefix, c.Net.Bridge, c.Net.Gateway)
			}

			fmt.Fprintln(e.stdout)
			printNodes(e, c)
		}

		return nil
	}

	flags.register(cmd)
	cmd.Flags().BoolVar(&addresses, "addresses", false, "print only the node addresses, comma-separated (for -n)")
	cmd.Flags().BoolVar(&prometheus, "prometheus", false, "print a Prometheus scrape config of the nodes' metrics endpoints (needs a cluster created with --metrics)")
	cmd.MarkFlagsMutuallyExclusive("addresses", "prometheus")

	return cmd
}

func newClusterDestroyCommand(e *env) *cobra.Command {
	var flags clusterFlags

	cmd := &cobra.Command{
		Use:   "destroy",
		Short: "Stop every process of a local cluster and remove its state",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := flags.load()
			if err != nil {
				return err
			}

			if err = c.Destroy(); err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "cluster %q destroyed: %d node(s) stopped, %s removed\n", c.Name, len(c.Nodes), c.Dir)

			return nil
		},
	}

	flags.register(cmd)

	return cmd
}

func printNodes(e *env, c *localcluster.Cluster) {
	running := c.Running()
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tADDRESS\tPID\tSTATE\tSTAGE")

	for _, n := range c.Nodes {
		state := "stopped"
		if running[n.Name] {
			state = "running"
		}

		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", n.Name, n.Type, n.Address, n.PID, state, c.Stage(n))
	}

	tw.Flush() //nolint:errcheck // terminal output
}

// binaries is dir, or the folder of aegisctl's own binary.
func binaries(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}

	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding machined: %w (give --bin-dir)", err)
	}

	return filepath.Dir(exe), nil
}
