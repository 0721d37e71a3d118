package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/aegis-os/aegis/machined/localcluster"
)

// Etcd is the figures of the etcd cluster: how fast cluster create forms
// it, what a member holds at idle, and a snapshot and its restore.
type Etcd struct {
	// ControlPlanes and Workers of the cluster ClusterUp timed, from the
	// call of cluster create until every control plane voted and every
	// service of every node was up.
	ControlPlanes int           `json:"control_planes"`
	Workers       int           `json:"workers"`
	ClusterUp     time.Duration `json:"cluster_up_ns"`
	// SingleUp is one control plane's machined start to etcd healthy, the
	// bootstrap sent as soon as the node was ready.
	SingleUp time.Duration `json:"single_control_plane_up_ns"`
	// IdleRSS is each control plane's etcd VmRSS at idle, bytes.
	IdleRSS []uint64 `json:"idle_rss_bytes"`
	// Keys were written before the snapshot; SnapshotBytes is its size.
	Keys          int   `json:"keys"`
	SnapshotBytes int64 `json:"snapshot_bytes"`
	// Snapshot is EtcdSnapshot through apid into a file; Restore is
	// EtcdRecover and Bootstrap with recover on a fresh control plane until
	// its etcd is healthy again.
	Snapshot time.Duration `json:"snapshot_ns"`
	Restore  time.Duration `json:"restore_ns"`
}

// Where the etcd stage's clusters live.
var (
	EtcdSingleCIDR  = netip.MustParsePrefix("127.7.4.0/24")
	EtcdClusterCIDR = netip.MustParsePrefix("127.7.5.0/24")
	EtcdRestoreCIDR = netip.MustParsePrefix("127.7.6.0/24")
)

// etcdBatch is the puts of one transaction, under etcd's default limit of
// 128 operations per transaction.
const etcdBatch = 100

func (r *run) etcd(ctx context.Context) error {
	e := &Etcd{ControlPlanes: 3, Workers: 2, Keys: r.plan.EtcdKeys}
	r.res.Etcd = e

	if err := r.etcdSingle(ctx, e); err != nil {
		return err
	}

	start := time.Now()

	c, err := r.etcdCluster(ctx, "etcd", EtcdClusterCIDR, e.ControlPlanes, e.Workers, false)
	if err != nil {
		return err
	}

	e.ClusterUp = time.Since(start)
	r.logf("etcd: %d control planes + %d workers, all voters healthy in %s", e.ControlPlanes, e.Workers, formatDuration(e.ClusterUp))

	time.Sleep(r.plan.Settle)

	for _, cp := range c.ControlPlanes() {
		children, err := childrenOf(cp.PID)
		if err != nil {
			return err
		}

		rss, _, _ := readMemory(children["etcd"]) //nolint:errcheck // a missing figure shows as "-"
		e.IdleRSS = append(e.IdleRSS, rss)
	}

	if err = r.tokenStores(ctx, c); err != nil {
		return fmt.Errorf("token stores: %w", err)
	}

	snapshot := filepath.Join(r.dir, "etcd.snapshot")
	if err = r.etcdSnapshot(ctx, c, e, snapshot); err != nil {
		return err
	}

	return r.etcdRestore(ctx, e, snapshot)
}

// etcdSingle times one control plane from machined's start to etcd healthy.
func (r *run) etcdSingle(ctx context.Context, e *Etcd) error {
	c, err := r.etcdCluster(ctx, "etcd-single", EtcdSingleCIDR, 1, 0, false)
	if err != nil {
		return err
	}

	up := time.Now()

	started, err := processStart(c.Nodes[0].PID)
	if err != nil {
		return err
	}

	e.SingleUp = up.Sub(started)
	r.logf("etcd: one control plane, start to etcd healthy in %s", formatDuration(e.SingleUp))

	return r.destroy(c)
}

func (r *run) etcdCluster(ctx context.Context, name string, cidr netip.Prefix, cps, workers int, skip bool) (*localcluster.Cluster, error) {
	c, err := localcluster.Create(ctx, localcluster.Options{
		Name: name, ControlPlanes: cps, Workers: workers, CIDR: cidr, SkipBootstrap: skip,
		StateDir: filepath.Join(r.dir, "clusters"), BinDir: r.cfg.BinDir, Timeout: clusterTimeout,
	})
	if err != nil {
		return nil, errors.Join(err, reap(filepath.Join(r.dir, "clusters", name), name))
	}

	r.clean.push("cluster "+name, func() error { return r.destroy(c) })

	return c, nil
}

// etcdSnapshot writes the plan's keys, then times a snapshot through apid.
func (r *run) etcdSnapshot(ctx context.Context, c *localcluster.Cluster, e *Etcd, path string) error {
	cp := c.ControlPlanes()[0]

	kv, err := etcdClientOf(c, cp)
	if err != nil {
		return err
	}
	defer kv.Close() //nolint:errcheck // bench client

	for i := 0; i < e.Keys; i += etcdBatch {
		var ops []clientv3.Op
		for j := i; j < min(i+etcdBatch, e.Keys); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("bench/key-%06d", j), fmt.Sprintf("value of key %d", j)))
		}

		if _, err = kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("bench: writing keys: %w", err)
		}
	}

	cli, err := c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // bench client

	start := time.Now()

	rc, err := cli.EtcdSnapshot(client.WithNode(ctx, cp.Address), &machine.EtcdSnapshotRequest{})
	if err != nil {
		return err
	}
	defer rc.Close() //nolint:errcheck // read side

	f, err := os.Create(path)
	if err != nil {
		return err
	}

	e.SnapshotBytes, err = io.Copy(f, rc)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}

	e.Snapshot = time.Since(start)
	r.logf("etcd: snapshot of %d keys (%d bytes) in %s", e.Keys, e.SnapshotBytes, formatDuration(e.Snapshot))

	return nil
}

// etcdRestore times the recovery of the snapshot into a fresh control plane.
func (r *run) etcdRestore(ctx context.Context, e *Etcd, path string) error {
	c, err := r.etcdCluster(ctx, "etcd-restore", EtcdRestoreCIDR, 1, 0, true)
	if err != nil {
		return err
	}

	cli, err := c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // bench client

	nodeCtx := client.WithNode(ctx, c.Nodes[0].Address)
	start := time.Now()

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only

	if _, err = cli.EtcdRecover(nodeCtx, f); err != nil {
		return err
	}

	if err = cli.Bootstrap(nodeCtx, &machine.BootstrapRequest{RecoverEtcd: true}); err != nil {
		return err
	}

	if err = c.WaitVoters(ctx, cli, time.Now().Add(clusterTimeout)); err != nil {
		return err
	}

	kv, err := etcdClientOf(c, c.Nodes[0])
	if err != nil {
		return err
	}
	defer kv.Close() //nolint:errcheck // bench client

	resp, err := kv.Get(ctx, "bench/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}

	e.Restore = time.Since(start)

	if resp.Count != int64(e.Keys) {
		return fmt.Errorf("bench: %d keys after the restore, want %d", resp.Count, e.Keys)
	}

	r.logf("etcd: restore of %d keys until served in %s", e.Keys, formatDuration(e.Restore))

	return nil
}

// etcdClientOf is a client of a control plane's etcd with its own client
// certificate.
func etcdClientOf(c *localcluster.Cluster, n localcluster.Node) (*clientv3.Client, error) {
	pki := filepath.Join(c.StatePath(n), "etcd", "pki")

	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "client.crt"), filepath.Join(pki, "client.key"))
	if err != nil {
		return nil, err
	}

	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	return clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + n.Address + ":2379"},
		TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
}
