package health

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/replies"
)

// WaitNodes checks opts.Nodes (the endpoint's own node when none) in
// rounds until every one is healthy, the timeout or the end of ctx, and
// returns the last round; its error names what is not healthy.
func WaitNodes(ctx context.Context, opts Options) (Result, error) {
	opts = opts.withDefaults()

	clk := opts.Clock
	start := clk.Now()
	deadline := start.Add(opts.Timeout)
	shown := map[string]string{}

	for {
		round := checkNodes(ctx, opts)
		reportChanges(opts, round, shown, clk.Now().Sub(start))

		if round.Healthy() {
			return Result{Round: round, Elapsed: clk.Now().Sub(start)}, nil
		}

		if clk.Now().After(deadline) {
			return Result{Round: round}, fmt.Errorf("not healthy after %s: %s", opts.Timeout, round.Problems())
		}

		if !clock.Sleep(ctx, clk, opts.Interval) {
			return Result{Round: round}, fmt.Errorf("interrupted before every node was healthy: %s", round.Problems())
		}
	}
}

// labels are the names progress uses for the nodes checked.
func (o Options) labels() []string {
	if len(o.Nodes) > 0 {
		return o.Nodes
	}

	return []string{o.endpointLabel()}
}

// checkNodes asks every node for its services once.
func checkNodes(ctx context.Context, opts Options) Round {
	round := Round{}
	for _, n := range opts.labels() {
		round[n] = "no reply"
	}

	named := len(opts.Nodes) > 0
	if named {
		ctx = client.WithNodes(ctx, opts.Nodes...)
	}

	callCtx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()

	resp, err := opts.Client.MachineClient.ServiceList(callCtx, &emptypb.Empty{})
	if err != nil {
		for n := range round {
			round[n] = "not answering: " + opts.Explain(err).Error()
		}

		return round
	}

	for _, m := range resp.GetMessages() {
		// Without nodes named there is one node, whatever its reply says.
		node := opts.labels()[0]
		if h := m.GetMetadata().GetHostname(); named && h != "" {
			node = h
		}

		if text, failed := replies.Failure(m.GetMetadata()); failed {
			round[node] = "not answering: " + text

			continue
		}

		round[node] = ServiceProblems(m.GetServices(), slices.Contains(opts.ControlPlanes, node))
	}

	return round
}

// ServiceProblems says what keeps a node's services from being up, or
// nothing when all are: each service not running, unhealthy or not yet
// checked, none at all, and trustd missing on a control plane.
func ServiceProblems(services []*machine.ServiceInfo, controlPlane bool) string {
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

// reportChanges hands Progress each node whose state changed since the
// last round, sorted.
func reportChanges(opts Options, round Round, shown map[string]string, elapsed time.Duration) {
	for _, n := range slices.Sorted(maps.Keys(round)) {
		state := "healthy"
		if round[n] != "" {
			state = "waiting: " + round[n]
		}

		if shown[n] != state {
			opts.Progress(elapsed, n+": "+state)
			shown[n] = state
		}
	}
}
