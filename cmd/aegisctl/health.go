package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/client/connect"
	"github.com/aegis-os/aegis/client/health"
)

// healthFlags say which nodes health checks and how long it waits.
type healthFlags struct {
	controlPlanes []string
	workers       []string
	timeout       time.Duration
}

func newHealthCommand(e *env) *cobra.Command {
	var flags healthFlags

	cmd := &cobra.Command{
		Use:   "health",
		Short: "Wait until the cluster, or the nodes named, are healthy",
		Long: `Without nodes named, check the whole cluster from the endpoint (a control
plane): etcd has every control plane as a voter and one leader; every member
node answers and all its services are up; every node's clock is synced and its
certificate has more than a quarter of its life left; all nodes accept the same
CAs. Progress is printed as it comes; after --wait-timeout the command fails
naming what is not healthy (node and service, or etcd member).

With nodes named (--control-plane-nodes and --worker-nodes, else -n or the
context's nodes), wait until each of them answers and every service of each is
running and healthy, printing each node's progress; control planes must also
run trustd.`,
		Args: cobra.NoArgs,
	}

	format := addDocumentFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			opts, err := flags.options(s)
			if err != nil {
				return err
			}

			named := s.named() || len(flags.controlPlanes)+len(flags.workers) > 0

			res, err := waitHealth(ctx, e, opts, named, *format == formatTable)

			if *format != formatTable && res.Round != nil {
				if werr := writeDocument(e.stdout, *format, healthDocument(res.Round)); werr != nil {
					return werr
				}
			}

			return err
		})
	}

	cmd.Flags().StringSliceVar(&flags.controlPlanes, "control-plane-nodes", nil, "control-plane nodes to check (they must run trustd)")
	cmd.Flags().StringSliceVar(&flags.workers, "worker-nodes", nil, "worker nodes to check")
	cmd.Flags().DurationVar(&flags.timeout, "wait-timeout", health.DefaultTimeout, "how long to wait for every node to be healthy")
	//nolint:errcheck // the flags exist
	cmd.RegisterFlagCompletionFunc("control-plane-nodes", e.completeTargets)
	//nolint:errcheck // the flags exist
	cmd.RegisterFlagCompletionFunc("worker-nodes", e.completeTargets)

	return cmd
}

// options are the health check of the nodes the flags name (else the
// session's), progress printed to stderr as it comes.
func (f healthFlags) options(s *session) (health.Options, error) {
	nodes, err := connect.CanonicalNodes(splitList(append(slices.Clone(f.controlPlanes), f.workers...)))
	if err != nil {
		return health.Options{}, err
	}

	if len(nodes) == 0 {
		nodes = s.nodes
	}

	controlPlanes, err := connect.CanonicalNodes(splitList(f.controlPlanes))
	if err != nil {
		return health.Options{}, err
	}

	return health.Options{
		Client: s.client, Endpoints: s.endpoints, Nodes: nodes, ControlPlanes: controlPlanes,
		Timeout: f.timeout, Clock: s.e.clock, Explain: s.explain,
		Progress: func(elapsed time.Duration, line string) {
			fmt.Fprintf(s.e.stderr, "[%5.1fs] %s\n", elapsed.Seconds(), line)
		},
	}, nil
}

// waitHealth waits for the nodes named, else for the cluster (else, from
// an endpoint that checks no cluster, for its own node); table prints the
// verdict's line of a wait that ended healthy.
func waitHealth(ctx context.Context, e *env, opts health.Options, named, table bool) (health.Result, error) {
	if !named {
		res, err := health.WaitCluster(ctx, opts)
		if !errors.Is(err, health.ErrNoClusterHealth) {
			if err == nil && table {
				fmt.Fprintf(e.stdout, "cluster healthy in %.1fs\n", res.Elapsed.Seconds())
			}

			return res, err
		}

		fmt.Fprintln(e.stderr, "the endpoint checks no cluster health; checking its own node only")
	}

	res, err := health.WaitNodes(ctx, opts)
	if err == nil && table {
		n := len(res.Round)
		fmt.Fprintf(e.stdout, "%d %s healthy in %.1fs\n", n, plural(n, "node", "nodes"), res.Elapsed.Seconds())
	}

	return res, err
}
