package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/client/etcdsnapshot"
)

func newEtcdSnapshotCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot FILE",
		Short: "Save a snapshot of one node's etcd to FILE",
		Long: `Save a snapshot of the etcd member of one node (the endpoint's, or the one
-n names) to FILE. The file appears only once the whole snapshot has arrived
and checked out (its SHA-256 and its backend); its size and revision are
printed. Needs os:etcd:backup or os:admin.`,
		Example: `  aegisctl etcd snapshot db.snapshot
  aegisctl -n 127.5.0.3 etcd snapshot /backup/etcd-$(date +%F).snapshot`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withSession(cmd, func(ctx context.Context, s *session) error {
				if len(s.nodes) > 1 {
					return errors.New("a snapshot comes from one node: name at most one with -n")
				}

				info, err := etcdsnapshot.Save(s.nodeContext(ctx), args[0], snapshotOptions(s))
				if err != nil {
					return err
				}

				fmt.Fprintf(e.stdout, "snapshot saved to %s: %d bytes, revision %d\n", args[0], info.Size, info.Revision)

				return nil
			})
		},
	}
}

func newBootstrapCommand(e *env) *cobra.Command {
	var recoverFrom string

	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Form the etcd cluster on one control plane",
		Long: `Form the etcd cluster on one control plane (the endpoint's node, or the one
-n names): its etcd starts as a cluster of its own, and the other control
planes join it. A cluster is bootstrapped once; a second bootstrap is
refused. With --recover-from, the new cluster starts from a snapshot that
'aegisctl etcd snapshot' saved: the file is checked, uploaded, and the node
must have no etcd data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withSession(cmd, func(ctx context.Context, s *session) error {
				if len(s.nodes) > 1 {
					return errors.New("bootstrap forms the cluster on one node: name at most one with -n")
				}

				ctx = s.nodeContext(ctx)

				if recoverFrom != "" {
					if err := etcdsnapshot.Upload(ctx, recoverFrom, snapshotOptions(s)); err != nil {
						return err
					}
				}

				if err := s.client.Bootstrap(ctx, &machine.BootstrapRequest{RecoverEtcd: recoverFrom != ""}); err != nil {
					return s.explain(err)
				}

				fmt.Fprintln(e.stdout, "etcd bootstrapped")

				return nil
			})
		},
	}

	cmd.Flags().StringVar(&recoverFrom, "recover-from", "", "snapshot file to start the new cluster from")

	return cmd
}

// snapshotOptions reach the session's nodes and word errors as the
// session does.
func snapshotOptions(s *session) etcdsnapshot.Options {
	return etcdsnapshot.Options{Client: s.client, Explain: s.explain}
}
