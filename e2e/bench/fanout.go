package bench

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fanOut times Version with `nodes` naming the first N nodes (the control
// plane first) for each count of the plan, through the control plane's
// apid, interleaved.
func (r *run) fanOut(ctx context.Context, e *clusterEnv) error {
	r.logf("fan-out: %d calls per node count %v", r.plan.FanOutCalls, r.plan.FanOutNodes)

	out, err := r.fanOutCases(ctx, e, r.plan.FanOutNodes)
	r.res.FanOut = append(r.res.FanOut, out...)

	return err
}

// fanOutCases times Version fanned out to each count of nodes, interleaved.
func (r *run) fanOutCases(ctx context.Context, e *clusterEnv, counts []int) ([]FanOut, error) {
	addrs := e.c.Addresses()
	p := r.plan

	var vs []variant

	for _, n := range counts {
		if n > len(addrs) {
			return nil, fmt.Errorf("bench: fan-out to %d nodes in a cluster of %d", n, len(addrs))
		}

		vs = append(vs, variant{fmt.Sprintf("nodes=%d", n), p.FanOutCalls, fanOutCall(e.cli, addrs[:n]),
			[][]int{e.allProcs, {e.cpProcs["apid"]}}})
	}

	lat, err := compare(ctx, p.Rounds, p.Budget, vs...)
	if err != nil {
		return nil, err
	}

	out := make([]FanOut, len(counts))
	for i, n := range counts {
		out[i] = FanOut{Nodes: n, Latency: lat[i].Case()}
	}

	return out, nil
}

// fanOutCall calls Version on nodes and checks that each answered.
func fanOutCall(cli *client.Client, nodes []string) func(context.Context) error {
	return func(ctx context.Context) error {
		resp, err := cli.MachineClient.Version(client.WithNodes(ctx, nodes...), &emptypb.Empty{})
		if err != nil {
			return err
		}

		if len(resp.GetMessages()) != len(nodes) {
			return fmt.Errorf("%d replies from %d nodes", len(resp.GetMessages()), len(nodes))
		}

		for _, m := range resp.GetMessages() {
			if msg := m.GetMetadata().GetError(); msg != "" {
				return fmt.Errorf("node %s: %s", m.GetMetadata().GetHostname(), msg)
			}
		}

		return nil
	}
}
