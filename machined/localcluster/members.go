package localcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/api/membership"
)

// waitMembers waits until every control plane lists every node of the
// cluster as a member, under its name, address and role: apid routes only
// to listed members, and a cluster-wide procedure walks that list, so a
// cluster handed over before is one whose nodes can be missed.
func (c *Cluster) waitMembers(ctx context.Context, cli *client.Client, deadline time.Time) error {
	for {
		missing, err := c.unlisted(ctx, cli)
		if err == nil && len(missing) == 0 {
			return nil
		}

		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("localcluster: reading the member list: %w", err)
			}

			return fmt.Errorf("localcluster: not members yet: %s", strings.Join(missing, "; "))
		}

		if !sleepCtx(ctx, pollInterval) {
			return ctx.Err()
		}
	}
}

// unlisted names, for each control plane, the nodes its member list lacks.
func (c *Cluster) unlisted(ctx context.Context, cli *client.Client) ([]string, error) {
	var missing []string

	for _, cp := range c.ControlPlanes() {
		callCtx, cancel := context.WithTimeout(client.WithNode(ctx, cp.Address), 10*time.Second)
		resp, err := membership.NewMembershipServiceClient(cli.Conn()).List(callCtx, &membership.ListRequest{})

		cancel()

		if err != nil {
			return nil, fmt.Errorf("%s: %w", cp.Name, err)
		}

		var listed []*membership.Member
		for _, msg := range resp.GetMessages() {
			listed = append(listed, msg.GetMembers()...)
		}

		for _, n := range c.Nodes {
			role := "worker"
			if n.Type.IsControlPlane() {
				role = "controlplane"
			}

			if !slices.ContainsFunc(listed, func(m *membership.Member) bool {
				return m.GetHostname() == n.Name && m.GetRole() == role && slices.Contains(m.GetAddresses(), n.Address)
			}) {
				missing = append(missing, fmt.Sprintf("%s not listed by %s", n.Name, cp.Name))
			}
		}
	}

	return missing, nil
}
