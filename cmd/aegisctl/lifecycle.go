package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

func newRebootCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reboot",
		Short: "Reboot each node: stop its services and run its boot sequence again",
		Long: `Reboot each node. A node run by machined as an ordinary process stops its
services, just after replying, and runs its boot sequence again; its API is
down until apid has started again. The events of the reboot carry the actor
ID printed for each node: the reboot is over at the boot STOP event of that
actor ('aegisctl events --tail -1'). With --wait, follow each node's machine
status and print its stages until it is running and ready again.`,
		Example: `  aegisctl -n 127.5.0.3 reboot --wait`,
		Args:    cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	wait := addWaitFlags(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return lifecycleCommand[*machine.RebootResponse, *machine.Reboot]{
			call: func(ctx context.Context, c *client.Client) (*machine.RebootResponse, error) {
				return c.MachineClient.Reboot(ctx, &machine.RebootRequest{})
			},
			msgs: func(r *machine.RebootResponse) []*machine.Reboot { return r.GetMessages() },
			what: "reboot",
		}.run(e, cmd, *format, wait)
	}

	return cmd
}

func newShutdownCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shutdown",
		Short: "Shut each node down: stop its services and end machined",
		Long: `Shut each node down: stop its services and end machined. With --wait, follow
each node's machine status and print its stages until its API is gone.`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	wait := addWaitFlags(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return lifecycleCommand[*machine.ShutdownResponse, *machine.Shutdown]{
			call: func(ctx context.Context, c *client.Client) (*machine.ShutdownResponse, error) {
				return c.MachineClient.Shutdown(ctx, &machine.ShutdownRequest{})
			},
			msgs:     func(r *machine.ShutdownResponse) []*machine.Shutdown { return r.GetMessages() },
			what:     "shutdown",
			shutdown: true,
		}.run(e, cmd, *format, wait)
	}

	return cmd
}

// waitFlags are --wait and --wait-timeout of reboot and shutdown.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func addWaitFlags(cmd *cobra.Command) *waitFlags {
	w := &waitFlags{}
	cmd.Flags().BoolVar(&w.wait, "wait", false, "follow each node's machine status and print its stages until it is done")
	cmd.Flags().DurationVar(&w.timeout, "wait-timeout", 10*time.Minute, "how long --wait waits")

	return w
}

// lifecycleCommand is reboot or shutdown: the call, its actor table, and
// with --wait the progress of each node that accepted it.
type lifecycleCommand[R proto.Message, M actorReply] struct {
	call     func(ctx context.Context, c *client.Client) (R, error)
	msgs     func(R) []M
	what     string
	shutdown bool
}

func (l lifecycleCommand[R, M]) run(e *env, cmd *cobra.Command, format outputFormat, wait *waitFlags) error {
	if wait.wait && format != formatTable {
		return errWaitFormat
	}

	return e.withSession(cmd, func(ctx context.Context, s *session) error {
		waiter := newLifecycleWait(s, l.shutdown, wait.timeout)
		if wait.wait {
			waiter.recordBefore(ctx, s.nodes)
		}

		resp, err := l.call(s.nodeContext(ctx), s.client)
		if err != nil {
			return s.explain(err)
		}

		if err = printReply(e.stdout, format, resp, false, func(w io.Writer) { actorTable(w, l.msgs(resp), s.named(), l.what) }); err != nil {
			return err
		}

		failed := failedNodes(resp)
		if !wait.wait {
			return failed
		}

		var accepted []string

		for _, m := range l.msgs(resp) {
			if failureOf(m.GetMetadata()) == nil && s.named() {
				accepted = append(accepted, m.GetMetadata().GetHostname())
			}
		}

		if s.named() && len(accepted) == 0 {
			return failed
		}

		return errors.Join(failed, waiter.run(ctx, accepted))
	})
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
