package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/api/membership"
)

func newMembersCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the nodes that hold certificates of the cluster, and remove a node that is gone",
		Long: `The cluster's member list is read with 'aegisctl get members'. A cluster-wide
procedure (a CA or token rotation) walks that list, and refuses to start while
a node that holds a live certificate of the cluster is not in it: it would be
left behind. 'members certified' lists those nodes; 'members remove' takes a
worker that is gone for good out of the cluster.`,
	}

	cmd.AddCommand(newMembersCertifiedCommand(e), newMembersRemoveCommand(e))

	return cmd
}

func newMembersCertifiedCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certified",
		Short: "List the nodes that hold live certificates of the cluster",
		Long: `List the nodes that hold live certificates of the cluster, as a control
plane's etcd knows them: the control planes (etcd's members) and every worker
whose name trustd bound, until its certificate expires. Ask a control-plane
endpoint; a worker answers FailedPrecondition.`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*membership.CertifiedResponse]{
			call: func(ctx context.Context, c *client.Client) (*membership.CertifiedResponse, error) {
				return membership.NewMembershipServiceClient(c.Conn()).Certified(ctx, &membership.CertifiedRequest{})
			},
			table: func(w io.Writer, r *membership.CertifiedResponse, named bool) { certifiedTable(w, r, named) },
		}.run(e, cmd, *format)
	}

	return cmd
}

func certifiedTable(w io.Writer, resp *membership.CertifiedResponse, named bool) {
	header(w, named, "HOSTNAME\tROLE\tADDRESSES\tCERTIFIED UNTIL")

	eachNode(w, resp.GetMessages(), func(m *membership.CertifiedNodes) {
		for _, n := range m.GetNodes() {
			until := "etcd member"
			if n.GetNotAfter() != nil {
				until = n.GetNotAfter().AsTime().UTC().Format(time.RFC3339)
			}

			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				n.GetHostname(), n.GetRole(), strings.Join(n.GetAddresses(), ","), until)
		}
	})
}

func newMembersRemoveCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove NODE",
		Short: "Take a worker that is gone out of the cluster (admin only)",
		Long: `Take a worker that is gone for good out of the cluster: its member entry is
deleted and the name its certificate was bound to is released, so that a node
that replaces it may take the name, and cluster-wide procedures no longer wait
for it. Name the node by its hostname or one of its addresses; ask a
control-plane endpoint.

A node whose entry is still fresh (it sent a heartbeat within its age-out,
three heartbeat intervals, or it is still connected to a control plane that
holds its entry) is refused: stop or reset it first. A control plane
is refused too: it leaves through etcd's member removal ('aegisctl etcd
remove-member', or a reset of the node). A removed node that is alive after
all becomes a member again with its next heartbeat.`,
		Example: `  aegisctl members remove worker-2
  aegisctl members remove 10.5.0.7`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeMemberName,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			resp, err := membership.NewMembershipServiceClient(s.client.Conn()).Remove(ctx, &membership.RemoveRequest{Node: args[0]})
			if err != nil {
				return s.explain(err)
			}

			return printReply(e.stdout, *format, resp, true, func(w io.Writer) { removedTable(w, resp) })
		})
	}

	return cmd
}

// removedTable says what was taken out of the cluster.
func removedTable(w io.Writer, resp *membership.RemoveResponse) {
	for _, r := range resp.GetMessages() {
		var what []string
		if r.GetEntryDeleted() {
			what = append(what, "member entry deleted")
		}

		if r.GetNameReleased() {
			what = append(what, "name released")
		}

		fmt.Fprintf(w, "removed %s (%s): %s\n", r.GetHostname(), strings.Join(r.GetAddresses(), ", "), strings.Join(what, ", "))
	}
}
