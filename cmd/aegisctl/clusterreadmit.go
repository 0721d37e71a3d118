package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/machined/localcluster"
)

func newClusterReadmitCommand(e *env) *cobra.Command {
	var (
		flags   clusterFlags
		timeout time.Duration
	)

	cmd := &cobra.Command{
		Use:   "readmit NODE",
		Short: "Bring a worker left behind by a rotation back into a local cluster",
		Long: `Bring a worker of a local cluster back that was left behind: stopped while the
cluster's OS CA or static token rotated, or restored from a backup older
than a rotation. It trusts a CA the control planes no longer serve, or holds
a token trustd no longer takes, so it can neither renew, heartbeat nor be
reached.

readmit stops the node if it runs, writes its config anew from the
cluster's secrets bundle as it is now (keep the bundle current with
rotate-ca --secrets and token rotate-static --secrets), starts it with its
state kept, and waits until every control plane lists it as a member. The
node drops the certificates its new config does not accept and joins through
trustd again, under its name and address.

If the rotation was refused while the node was away, remove it first with
'aegisctl members remove NODE'. A control plane is refused: a rotation
stops while one is away.`,
		Example: `  aegisctl members remove aegis-local-worker-2
  aegisctl rotate-ca --dry-run=false --secrets ~/.aegis/clusters/aegis-local/secrets.yaml
  aegisctl cluster readmit aegis-local-worker-2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.load()
			if err != nil {
				return err
			}

			start := e.clock.Now()

			n, err := c.Readmit(cmd.Context(), args[0], timeout)
			if err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "%s (%s) is back: a member on every control plane after %.1fs, its config written from %s\n",
				n.Name, n.Address, e.clock.Now().Sub(start).Seconds(), c.SecretsPath())

			return nil
		},
	}

	flags.register(cmd)
	cmd.Flags().DurationVar(&timeout, "wait-timeout", localcluster.DefaultTimeout, "how long to wait for the node to be a member again")

	return cmd
}
