package etcd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Bootstrap asks the local member to form a new cluster of its own, from
// the snapshot EtcdRecover uploaded when fromSnapshot is set. It refuses
// when this member has data, when a bootstrap was asked before, and when a
// cluster answers at the other control planes. It returns once the request
// is handed to the service; the member starts right after.
func (e *Etcd) Bootstrap(ctx context.Context, fromSnapshot bool) error {
	if err := e.checkBootstrap(); err != nil {
		return err
	}

	if list, err := e.peerMembers(ctx); err == nil {
		return fmt.Errorf("%w: a cluster of %d members answers at the control-plane endpoints", ErrBootstrapped, len(list))
	}

	req := &bootstrapRequest{}

	if fromSnapshot {
		if _, err := os.Stat(e.recoverFile()); err != nil {
			return ErrNoSnapshot
		}

		req.snapshot = e.recoverFile()
	}

	e.mu.Lock()
	defer e.mu.Unlock()

	if e.bootstrap != nil {
		return fmt.Errorf("%w: bootstrap was already requested on this node", ErrBootstrapped)
	}

	e.bootstrap = req
	close(e.wake)

	return nil
}

func (e *Etcd) checkBootstrap() error {
	if !e.dataDirEmpty() {
		return fmt.Errorf("%w: the etcd data directory %s is not empty", ErrBootstrapped, e.dataDir())
	}

	e.mu.Lock()
	defer e.mu.Unlock()

	if e.bootstrap != nil {
		return fmt.Errorf("%w: bootstrap was already requested on this node", ErrBootstrapped)
	}

	return nil
}

// restore builds the data folder from the snapshot with the restore of
// the etcd binary (etcdutl's), as a cluster of this member alone, and drops
// the snapshot once it is in.
func (e *Etcd) restore(ctx context.Context, snapshot string) error {
	cmd := exec.CommandContext(ctx, e.cfg.Binary, "restore-snapshot",
		"--snapshot", snapshot, "--name", e.cfg.Name, "--data-dir", e.dataDir(),
		"--initial-cluster", e.cfg.Name+"="+e.peerURL(), "--initial-advertise-peer-urls", e.peerURL(),
		"--initial-cluster-token", e.cfg.ClusterToken)
	cmd.Stdout, cmd.Stderr, cmd.Env = e.cfg.Log, e.cfg.Log, []string{}

	if err := cmd.Run(); err != nil {
		_ = e.dropData()

		return fmt.Errorf("etcd: restoring the snapshot: %w", err)
	}

	e.log.Info("etcd data restored from a snapshot")

	return os.Remove(snapshot)
}
