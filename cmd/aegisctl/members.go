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

func newGetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the cluster's state",
	}

	cmd.AddCommand(newGetMembersCommand(e))

	return cmd
}

func newGetMembersCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "members",
		Aliases: []string{"member"},
		Short:   "List the cluster's nodes, as a control plane's etcd keeps them",
		Long: `List the nodes of the cluster: every control plane and every worker that
joined through trustd, with its addresses, role, version and when it last
refreshed its entry. A node that stops refreshing leaves the list after three
heartbeat intervals. Ask a control plane (the endpoint, or -n): workers run no
etcd. A member's hostname can name it in -n.`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*membership.ListResponse]{
			call: func(ctx context.Context, c *client.Client) (*membership.ListResponse, error) {
				return membership.NewMembershipServiceClient(c.Conn()).List(ctx, &membership.ListRequest{})
			},
			table: func(w io.Writer, r *membership.ListResponse, named bool) { membersTable(w, r, named, e.clock.Now()) },
		}.run(e, cmd, *format)
	}

	return cmd
}

func membersTable(w io.Writer, resp *membership.ListResponse, named bool, now time.Time) {
	header(w, named, "HOSTNAME\tROLE\tADDRESSES\tVERSION\tTIME\tLAST SEEN")

	for _, m := range resp.GetMessages() {
		if f := failureOf(m.GetMetadata()); f != nil {
			errorRow(w, f)

			continue
		}

		for _, mb := range m.GetMembers() {
			synced := "synced"
			if !mb.GetTimeSynced() {
				synced = "not synced"
			}

			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s ago\n", nodeCell(named, m.GetMetadata().GetHostname()),
				mb.GetHostname(), mb.GetRole(), strings.Join(mb.GetAddresses(), ","), mb.GetVersion(), synced,
				now.Sub(mb.GetLastSeen().AsTime()).Round(time.Second))
		}
	}
}
