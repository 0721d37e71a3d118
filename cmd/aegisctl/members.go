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

// membersKinds are the names `get` takes for the cluster's member list,
// which a control plane reads from etcd rather than from its resources.
var membersKinds = map[string]bool{"members": true, "member": true}

// getMembers lists the cluster's nodes, as a control plane's etcd keeps
// them: every control plane and every worker that joined through trustd,
// with its addresses, role, version and when it last refreshed its entry
// ("connected" for a worker whose connection to a control plane keeps it).
func getMembers(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*membership.ListResponse]{
		call: func(ctx context.Context, c *client.Client) (*membership.ListResponse, error) {
			return membership.NewMembershipServiceClient(c.Conn()).List(ctx, &membership.ListRequest{})
		},
		table: func(w io.Writer, r *membership.ListResponse, named bool) { membersTable(w, r, named, e.clock.Now()) },
	}.run(e, cmd, format)
}

func membersTable(w io.Writer, resp *membership.ListResponse, named bool, now time.Time) {
	header(w, named, "HOSTNAME\tROLE\tADDRESSES\tVERSION\tTIME\tLAST SEEN")

	eachNode(w, resp.GetMessages(), func(m *membership.Members) {
		for _, mb := range m.GetMembers() {
			synced := "synced"
			if !mb.GetTimeSynced() {
				synced = "not synced"
			}

			// A held entry's node is connected to a control plane now;
			// its last_seen is only rewritten now and then.
			seen := now.Sub(mb.GetLastSeen().AsTime()).Round(time.Second).String() + " ago"
			if mb.GetHeld() {
				seen = "connected"
			}

			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				mb.GetHostname(), mb.GetRole(), strings.Join(mb.GetAddresses(), ","), mb.GetVersion(), synced, seen)
		}
	})
}
