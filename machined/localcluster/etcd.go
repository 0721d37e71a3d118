package localcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// formEtcd waits, once every node is ready and etcd bootstrapped (see
// waitUp), until every control plane is a voting member, every service of
// every node is up, and every control plane lists every node as a member.
func (c *Cluster) formEtcd(ctx context.Context, cli *client.Client, deadline time.Time, w *bootWatch) error {
	if c.skipBootstrap {
		return c.checkServices(ctx, deadline)
	}

	if err := c.WaitVoters(ctx, cli, deadline); err != nil {
		return err
	}

	fmt.Fprintf(w.progress, "[%5.1fs] %-28s %-12s %d voting members\n", time.Since(w.start).Seconds(), "etcd", "", len(c.ControlPlanes()))

	if err := c.checkServices(ctx, deadline); err != nil {
		return err
	}

	if err := c.waitMembers(ctx, cli, deadline); err != nil {
		return err
	}

	fmt.Fprintf(w.progress, "[%5.1fs] %-28s %-12s every node listed by every control plane\n", time.Since(w.start).Seconds(), "members", "")

	return nil
}

// Bootstrap asks the first control plane to form the etcd cluster,
// retrying while it cannot answer yet.
func (c *Cluster) Bootstrap(ctx context.Context, cli *client.Client, deadline time.Time) error {
	first := c.ControlPlanes()[0]

	for {
		callCtx, cancel := context.WithTimeout(client.WithNode(ctx, first.Address), 10*time.Second)
		err := cli.Bootstrap(callCtx, &machine.BootstrapRequest{})

		cancel()

		if err == nil {
			return nil
		}

		if code := status.Code(err); (code != codes.Unavailable && code != codes.DeadlineExceeded) || time.Now().After(deadline) {
			return fmt.Errorf("localcluster: bootstrapping etcd on %s: %w", first.Name, err)
		}

		if !sleepCtx(ctx, pollInterval) {
			return ctx.Err()
		}
	}
}

// WaitVoters waits until the etcd members, as the first control plane lists
// them, are exactly the control planes, all voting.
func (c *Cluster) WaitVoters(ctx context.Context, cli *client.Client, deadline time.Time) error {
	first := c.ControlPlanes()[0]
	want := len(c.ControlPlanes())

	for {
		callCtx, cancel := context.WithTimeout(client.WithNode(ctx, first.Address), 10*time.Second)
		resp, err := cli.EtcdMemberList(callCtx, &machine.EtcdMemberListRequest{})

		cancel()

		voters, voting := 0, map[string]bool{}

		if err == nil && len(resp.GetMessages()) == 1 {
			for _, m := range resp.GetMessages()[0].GetMembers() {
				if !m.GetIsLearner() && m.GetHostname() != "" {
					voters++
					voting[m.GetHostname()] = true
				}
			}

			if voters == want && len(resp.GetMessages()[0].GetMembers()) == want {
				return nil
			}
		}

		if time.Now().After(deadline) {
			var tails strings.Builder

			for _, n := range c.ControlPlanes() {
				if !voting[n.Name] {
					fmt.Fprintf(&tails, "%s:\n%s", n.Name, c.Tail(n, tailLines))
				}
			}

			return fmt.Errorf("localcluster: etcd has %d of %d voting members (last error: %v)\n%s", voters, want, err, tails.String())
		}

		if !sleepCtx(ctx, pollInterval) {
			return ctx.Err()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
