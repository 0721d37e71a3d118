package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/etcdtls"
	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
)

// etcdDialTimeout bounds the connection to one etcd endpoint; the
// endpoints are the control planes, on the cluster's own network.
const etcdDialTimeout = 2 * time.Second

// etcdKeepAlive and etcdKeepAliveTimeout find a connection to a member cut
// off by a partition: no reset ever comes from a dropped link. gRPC pings
// an idle connection at most every 10 s (it raises a shorter interval to
// that), so the timeout does most of the work: gRPC also makes it the
// connection's TCP user timeout, and a call whose bytes stay
// unacknowledged that long closes the connection with Unavailable. clientv3
// retries a read on another member then, inside the token store's 3-s
// bound (etcdstore.DefaultTimeout); a write that was sent is not retried,
// and the store answers Unavailable (fail closed). TCP acknowledgements
// come from the kernel, so a busy member does not trip it.
const (
	etcdKeepAlive        = 10 * time.Second
	etcdKeepAliveTimeout = 2 * time.Second
)

// etcdFiles are what machined keeps of the node's etcd member under the
// state directory: the client certificate it issues at every boot (trustd
// reads the files at each handshake, so renewals apply) and the member's
// data, whose WAL exists once the member is part of a formed cluster.
type etcdFiles struct{ dir string }

func (f etcdFiles) pki(name string) string { return filepath.Join(f.dir, "pki", name) }

// present reports whether machined runs etcd on this node (its CA is there).
func (f etcdFiles) present() bool {
	_, err := os.Stat(f.pki("ca.crt"))

	return err == nil
}

// formed reports whether the local member has joined a formed cluster.
func (f etcdFiles) formed() bool {
	_, err := os.Stat(filepath.Join(f.dir, "data", "member", "wal"))

	return err == nil
}

// client are trustd's client files: the trusted etcd CAs and the client
// pair, read at each handshake, so that renewals and the trust of an etcd
// CA rotation apply without a restart of trustd.
func (f etcdFiles) client() etcdtls.Files {
	return etcdtls.Files{CA: f.pki("ca.crt"), Cert: f.pki("client.crt"), Key: f.pki("client.key")}
}

// etcdEndpoints are the client URLs of this node's member and of the other
// control planes: any member with quorum can answer.
func etcdEndpoints(listen string, controlPlanes []string) []string {
	hosts := controlPlanes
	if h, _, err := net.SplitHostPort(listen); err == nil {
		hosts = append([]string{h}, hosts...)
	}

	var out []string

	for _, h := range hosts {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}

		u := "https://" + net.JoinHostPort(h, strconv.Itoa(certs.EtcdClientPort))
		if h != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}

	return out
}

// etcdConfig is the configuration of trustd's clients of endpoints.
func etcdConfig(files etcdFiles, endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints: endpoints, DialOptions: []grpc.DialOption{files.client().DialOption()},
		DialTimeout: etcdDialTimeout, Logger: zap.NewNop(),
		DialKeepAliveTime: etcdKeepAlive, DialKeepAliveTimeout: etcdKeepAliveTimeout,
	}
}

// openEtcdStore puts the handover store in front of the bbolt one when
// machined runs etcd on this node: bbolt until the cluster is formed, etcd
// from then on.
func (d *daemon) openEtcdStore(state, listen string, controlPlanes []string) error {
	files := etcdFiles{dir: filepath.Join(state, "etcd")}
	if !files.present() {
		return nil
	}

	if _, err := files.client().Config(); err != nil {
		return err
	}

	var err error

	d.etcd, err = clientv3.New(etcdConfig(files, etcdEndpoints(listen, controlPlanes)...))
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}

	// The leader's client does not wait for its connection: a keep-alive
	// that finds none goes through d.etcd.
	d.leader = etcdutil.NewLeader(d.etcd, func(endpoint string) (*clientv3.Client, error) {
		cfg := etcdConfig(files, endpoint)
		cfg.DialTimeout = 0

		return clientv3.New(cfg)
	}, nil)

	shared, err := etcdstore.New(etcdstore.Config{Client: d.etcd})
	if err != nil {
		return err
	}

	h, err := etcdstore.NewHandover(etcdstore.HandoverConfig{
		Local: d.bolt, Shared: shared, Formed: files.formed,
		Marker: filepath.Join(state, "trustd", "tokens-on-etcd"), Logger: d.log,
	})
	if err != nil {
		return err
	}

	d.store = h
	d.log.Info("token store: bbolt until the cluster's etcd is formed, etcd from then on",
		slog.Bool(logkey.OnEtcd, h.OnEtcd()))

	return nil
}
