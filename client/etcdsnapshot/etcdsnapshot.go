// Package etcdsnapshot saves a node's etcd snapshot to a file and uploads
// one for a recovery, checking the file on both ends: a saved file appears
// only once the whole snapshot has arrived and checked out, and a file
// that does not check out is never sent. The package imports no server
// package.
package etcdsnapshot

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/etcdsnap"
)

// Client is the part of the Talos client the snapshots use; the node is
// the one the call's context routes to.
type Client interface {
	EtcdSnapshot(ctx context.Context, req *machine.EtcdSnapshotRequest, opts ...grpc.CallOption) (io.ReadCloser, error)
	EtcdRecover(ctx context.Context, snapshot io.Reader, opts ...grpc.CallOption) (*machine.EtcdRecoverResponse, error)
}

// Options say how to reach the node and word its errors.
type Options struct {
	// Client makes the calls. Required.
	Client Client
	// Explain words the error of a call (or of the stream it answered
	// with) for a person. nil: the error as it is.
	Explain func(error) error
}

func (o Options) explain(err error) error {
	if o.Explain == nil || err == nil {
		return err
	}

	return o.Explain(err)
}

// Save streams the snapshot into a temporary file beside path, checks it
// (its SHA-256 and its backend), and moves it into place. The temporary
// file is removed whatever happens.
func Save(ctx context.Context, path string, opts Options) (etcdsnap.Info, error) {
	rc, err := opts.Client.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err != nil {
		return etcdsnap.Info{}, opts.explain(err)
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
		return etcdsnap.Info{}, opts.explain(err)
	}

	info, err := etcdsnap.Check(f.Name())
	if err != nil {
		return etcdsnap.Info{}, fmt.Errorf("the snapshot received is not usable: %w", err)
	}

	return info, os.Rename(f.Name(), path)
}

// Upload checks the snapshot at path and sends it to the node, for the
// bootstrap that recovers from it.
func Upload(ctx context.Context, path string, opts Options) error {
	if _, err := etcdsnap.Check(path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only

	if _, err = opts.Client.EtcdRecover(ctx, f); err != nil {
		return opts.explain(err)
	}

	return nil
}
