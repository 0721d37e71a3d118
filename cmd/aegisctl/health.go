package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/clock"
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
			var (
				round healthRound
				err   error
			)

			if s.named() || len(flags.controlPlanes)+len(flags.workers) > 0 {
				round, err = waitHealthy(ctx, s, flags, *format == formatTable)
			} else {
				round, err = waitClusterHealthy(ctx, s, flags.timeout, *format == formatTable)
				if errors.Is(err, errNoClusterHealth) {
					fmt.Fprintln(e.stderr, "the endpoint checks no cluster health; checking its own node only")

					round, err = waitHealthy(ctx, s, flags, *format == formatTable)
				}
			}

			if *format != formatTable && round != nil {
				if werr := writeDocument(e.stdout, *format, healthDocument(round)); werr != nil {
					return werr
				}
			}

			return err
		})
	}

	cmd.Flags().StringSliceVar(&flags.controlPlanes, "control-plane-nodes", nil, "control-plane nodes to check (they must run trustd)")
	cmd.Flags().StringSliceVar(&flags.workers, "worker-nodes", nil, "worker nodes to check")
	cmd.Flags().DurationVar(&flags.timeout, "wait-timeout", defaultHealthTimeout, "how long to wait for every node to be healthy")
	//nolint:errcheck // the flags exist
	cmd.RegisterFlagCompletionFunc("control-plane-nodes", e.completeTargets)
	//nolint:errcheck // the flags exist
	cmd.RegisterFlagCompletionFunc("worker-nodes", e.completeTargets)

	return cmd
}

// healthRound is what one round of checks found: per node, nothing if it is
// healthy, else what is wrong.
type healthRound map[string]string

// waitHealthy checks until every node is healthy, the timeout or an
// interrupt, and returns the last round; summary prints the verdict's line.
func waitHealthy(ctx context.Context, s *session, flags healthFlags, summary bool) (healthRound, error) {
	nodes, err := canonicalNodes(splitList(append(slices.Clone(flags.controlPlanes), flags.workers...)))
	if err != nil {
		return nil, err
	}

	if len(nodes) > 0 {
		s.nodes = nodes
	}

	controlPlanes, err := canonicalNodes(splitList(flags.controlPlanes))
	if err != nil {
		return nil, err
	}

	clk := s.e.clock
	start := clk.Now()
	deadline := start.Add(flags.timeout)
	shown := map[string]string{}

	for {
		round := checkHealth(ctx, s, controlPlanes)
		reportProgress(s, round, shown, clk.Now().Sub(start))

		if round.healthy() {
			if summary {
				fmt.Fprintf(s.e.stdout, "%d %s healthy in %.1fs\n", len(round), plural(len(round), "node", "nodes"), clk.Now().Sub(start).Seconds())
			}

			return round, nil
		}

		if clk.Now().After(deadline) {
			return round, fmt.Errorf("not healthy after %s: %s", flags.timeout, round.problems())
		}

		if !clock.Sleep(ctx, clk, healthPollInterval) {
			return round, fmt.Errorf("interrupted before every node was healthy: %s", round.problems())
		}
	}
}

// checkHealth asks every node for its services once.
func checkHealth(ctx context.Context, s *session, controlPlanes []string) healthRound {
	round := healthRound{}
	for _, n := range s.healthLabels() {
		round[n] = "no reply"
	}

	callCtx, cancel := context.WithTimeout(s.nodeContext(ctx), healthCallTimeout)
	defer cancel()

	resp, err := s.client.MachineClient.ServiceList(callCtx, &emptypb.Empty{})
	if err != nil {
		for n := range round {
			round[n] = "not answering: " + s.explain(err).Error()
		}

		return round
	}

	for _, m := range resp.GetMessages() {
		// Without nodes named there is one node, whatever its reply says.
		node := s.healthLabels()[0]
		if s.named() {
			node = nodeLabel(m.GetMetadata(), node)
		}

		if f := failureOf(m.GetMetadata()); f != nil {
			round[node] = "not answering: " + f.text

			continue
		}

		round[node] = serviceProblems(m.GetServices(), slices.Contains(controlPlanes, node))
	}

	return round
}

// healthLabels are the names progress uses for the nodes checked.
func (s *session) healthLabels() []string {
	if s.named() {
		return s.nodes
	}

	return []string{"endpoint " + strings.Join(s.endpoints, ",")}
}

// serviceProblems says what keeps a node's services from being up, or
// nothing when all are.
func serviceProblems(services []*machine.ServiceInfo, controlPlane bool) string {
	var problems []string

	hasTrustd := false

	for _, svc := range services {
		hasTrustd = hasTrustd || svc.GetId() == "trustd"

		switch h := svc.GetHealth(); {
		case svc.GetState() != "Running":
			problems = append(problems, fmt.Sprintf("%s is %s", svc.GetId(), svc.GetState()))
		case h != nil && !h.GetUnknown() && !h.GetHealthy():
			problems = append(problems, fmt.Sprintf("%s is unhealthy: %s", svc.GetId(), h.GetLastMessage()))
		case h != nil && h.GetUnknown():
			problems = append(problems, fmt.Sprintf("%s has not passed its health check yet", svc.GetId()))
		}
	}

	if len(services) == 0 {
		problems = append(problems, "no services yet")
	}

	if controlPlane && !hasTrustd {
		problems = append(problems, "trustd is not running (is it a control plane?)")
	}

	return strings.Join(problems, "; ")
}

func (r healthRound) healthy() bool {
	for _, p := range r {
		if p != "" {
			return false
		}
	}

	return true
}

// problems lists the unhealthy nodes, sorted.
func (r healthRound) problems() string {
	var out []string

	for _, n := range slices.Sorted(maps.Keys(r)) {
		if r[n] != "" {
			out = append(out, n+": "+r[n])
		}
	}

	return strings.Join(out, "; ")
}

// reportProgress prints each node whose state changed since the last round.
func reportProgress(s *session, round healthRound, shown map[string]string, elapsed time.Duration) {
	for _, n := range slices.Sorted(maps.Keys(round)) {
		state := "healthy"
		if round[n] != "" {
			state = "waiting: " + round[n]
		}

		if shown[n] != state {
			fmt.Fprintf(s.e.stderr, "[%5.1fs] %s: %s\n", elapsed.Seconds(), n, state)
			shown[n] = state
		}
	}
}
