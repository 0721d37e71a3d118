package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/internal/etcdsnap"
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

				info, err := saveSnapshot(s.nodeContext(ctx), s, args[0])
				if err != nil {
					return err
				}

				fmt.Fprintf(e.stdout, "snapshot saved to %s: %d bytes, revision %d\n", args[0], info.Size, info.Revision)

				return nil
			})
		},
	}
}

// saveSnapshot streams the snapshot into a temporary file beside path,
// checks it, and moves it into place.
func saveSnapshot(ctx context.Context, s *session, path string) (etcdsnap.Info, error) {
	rc, err := s.client.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err != nil {
		return etcdsnap.Info{}, s.explain(err)
	}
	defer rc.Close() //nolint:errcheck // read side

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return etcdsnap.Info{}, err
	}
	defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename

	_, err = io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}

	if cerr := f.Close(); err == nil {
		err = cerr
	}

	if err != nil {
		return etcdsnap.Info{}, s.explain(err)
	}

	info, err := etcdsnap.Check(f.Name())
	if err != nil {
		return etcdsnap.Info{}, fmt.Errorf("the snapshot received is not usable: %w", err)
	}

	return info, os.Rename(f.Name(), path)
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
					if err := uploadSnapshot(ctx, s, recoverFrom); err != nil {
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

// uploadSnapshot checks the snapshot at path and sends it to the node.
func uploadSnapshot(ctx context.Context, s *session, path string) error {
	if _, err := etcdsnap.Check(path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only

	if _, err = s.client.EtcdRecover(ctx, f); err != nil {
		return s.explain(err)
	}

	return nil
}
