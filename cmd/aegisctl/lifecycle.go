package main

import (
	"context"
	"fmt"
	"io"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
)

func newRebootCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reboot",
		Short: "Reboot each node: stop its services and run its boot sequence again",
		Long: `Reboot each node. A node run by machined as an ordinary process stops its
services, just after replying, and runs its boot sequence again; its API is
down until apid has started again. The events of the reboot carry the actor
ID printed for each node: the reboot is over at the boot STOP event of that
actor ('aegisctl events --tail -1').`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.RebootResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.RebootResponse, error) {
				return c.MachineClient.Reboot(ctx, &machine.RebootRequest{})
			},
			table: func(w io.Writer, r *machine.RebootResponse, named bool) {
				actorTable(w, r.GetMessages(), named, "reboot")
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

func newShutdownCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shutdown",
		Short: "Shut each node down: stop its services and end machined",
		Args:  cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.ShutdownResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.ShutdownResponse, error) {
				return c.MachineClient.Shutdown(ctx, &machine.ShutdownRequest{})
			},
			table: func(w io.Writer, r *machine.ShutdownResponse, named bool) {
				actorTable(w, r.GetMessages(), named, "shutdown")
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

// actorReply is a reply of Reboot or Shutdown.
type actorReply interface {
	GetMetadata() *common.Metadata
	GetActorId() string
}

func actorTable[M actorReply](w io.Writer, msgs []M, named bool, what string) {
	header(w, named, "RESPONSE\tACTOR ID")

	for _, m := range msgs {
		if f := failureOf(m.GetMetadata()); f != nil {
			errorRow(w, f)

			continue
		}

		fmt.Fprintf(w, "%s%s requested\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()), what, m.GetActorId())
	}
}
