package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
)

// wipeModes are the values of --wipe-mode, as talosctl spells them.
var wipeModes = map[string]machine.ResetRequest_WipeMode{
	"all":         machine.ResetRequest_ALL,
	"system-disk": machine.ResetRequest_SYSTEM_DISK,
	"user-disks":  machine.ResetRequest_USER_DISKS,
}

func newResetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Reset each node: leave the cluster, wipe its state, then shut down or reboot",
		Long: `Reset each node, as talosctl reset does. Just after replying, the node leaves
the cluster (a control plane leaves etcd first when --graceful, and refuses if
that would break quorum: the only control plane, or one whose peers do not
answer; with --graceful=false it is wiped without leaving etcd), drops its
entry in the member list, stops its services and wipes its state directory:
its keys and certificates, etcd's data, tokens, logs, revocation list and
containerd's state (Talos's EPHEMERAL). The machine config (Talos's STATE) is
outside the state directory and always kept. machined then ends, or with
--reboot boots again from the kept config: a worker joins again with its
token and gets new certificates.`,
		Example: `  aegisctl -n 127.5.0.3 reset --reboot
  aegisctl -n 127.5.0.3 reset --graceful=false`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	graceful := cmd.Flags().Bool("graceful", true, "leave etcd first (control planes); refused if that would break quorum")
	reboot := cmd.Flags().Bool("reboot", false, "boot again from the kept config instead of shutting down")
	labels := cmd.Flags().StringSlice("system-labels-to-wipe", nil, "partitions to wipe: EPHEMERAL (the state directory, the default); STATE is refused, the config is never wiped")
	mode := cmd.Flags().String("wipe-mode", "all", "all, system-disk or user-disks (an Aegis node has no user disks)")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req, err := resetRequest(*graceful, *reboot, *labels, *mode)
		if err != nil {
			return err
		}

		return lifecycleCommand[*machine.ResetResponse, *machine.Reset]{
			call: func(ctx context.Context, c *client.Client) (*machine.ResetResponse, error) {
				return c.MachineClient.Reset(ctx, req)
			},
			msgs: func(r *machine.ResetResponse) []*machine.Reset { return r.GetMessages() },
			what: "reset",
		}.run(e, cmd, *format, &waitFlags{})
	}

	return cmd
}

// resetRequest builds the request from the flags, refusing a wipe mode
// talosctl does not know.
func resetRequest(graceful, reboot bool, labels []string, mode string) (*machine.ResetRequest, error) {
	m, ok := wipeModes[mode]
	if !ok {
		return nil, fmt.Errorf("--wipe-mode %q: want all, system-disk or user-disks", mode)
	}

	req := &machine.ResetRequest{Graceful: graceful, Reboot: reboot, Mode: m}
	for _, l := range labels {
		req.SystemPartitionsToWipe = append(req.SystemPartitionsToWipe, &machine.ResetPartitionSpec{Label: strings.TrimSpace(l), Wipe: true})
	}

	return req, nil
}
