package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/ociimage"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// confineEtcd makes etcd's container: it sees its data folder, its run
// folder (its HTTP socket) and, read-only, its certificates.
func (n *Node) confineEtcd() *containerSpec {
	dir := n.layout.EtcdDir()

	return &containerSpec{
		rt: n.ctr, id: "etcd", memory: etcdMemoryLimit,
		mounts: []runner.Mount{
			{Path: filepath.Join(dir, "data")}, {Path: etcd.RunDir(dir)}, {Path: filepath.Join(dir, "pki"), ReadOnly: true},
		},
	}
}

// etcdRunner runs each start of etcd's server as its container, once the
// files machined wrote since (a restored snapshot, renewed certificates)
// are etcd's user's.
func (n *Node) etcdRunner(spec *containerSpec) func(runner.ProcessConfig) runner.Runner {
	return func(p runner.ProcessConfig) runner.Runner {
		return shareFirst{share: n.shareEtcdFiles, inner: spec.runnerFor(p)}
	}
}

// shareFirst runs share before each run of inner.
type shareFirst struct {
	share func() error
	inner runner.Runner
}

func (s shareFirst) String() string { return s.inner.String() }

func (s shareFirst) Run(ctx context.Context, notify runner.Notify) error {
	if err := s.share(); err != nil {
		return err
	}

	return s.inner.Run(ctx, notify)
}

// shareEtcdFiles gives etcd's folder to the users of the containers that
// read it, and nothing more: the folders searchable, not readable (0711);
// the CA certificate readable (it is public); the server and peer
// certificates and keys, the data and the run folder to etcd's user, when
// etcd runs as a container; the client certificate and key to trustd's user, who reads
// the token store on etcd with them. What does not exist yet is skipped.
func (n *Node) shareEtcdFiles() error {
	dir := n.layout.EtcdDir()
	pki, data := filepath.Join(dir, "pki"), filepath.Join(dir, "data")

	etcdUser, _ := ociimage.Lookup("etcd")
	trustdUser, _ := ociimage.Lookup("trustd")
	inContainer := n.etcd.container() != nil

	if inContainer {
		for _, d := range []string{data, etcd.RunDir(dir)} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("node: %w", err)
			}

			if err := giveTreeTo(etcdUser.User, d); err != nil {
				return err
			}
		}
	}

	for _, d := range []string{dir, pki, data, filepath.Join(data, "member")} {
		if err := os.Chmod(d, 0o711); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("node: %w", err)
		}
	}

	if err := os.Chmod(filepath.Join(pki, "ca.crt"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("node: %w", err)
	}

	owners := map[string]ociimage.User{"client": trustdUser.User}
	if inContainer {
		owners["server"], owners["peer"] = etcdUser.User, etcdUser.User
	}

	for name, u := range owners {
		for _, f := range []string{name + ".crt", name + ".key"} {
			if err := giveTo(u, filepath.Join(pki, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}

	return nil
}
