// Package etcdtest runs a one-member etcd server in a test, for the stores
// that keep the cluster's state in etcd.
package etcdtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start runs a one-member etcd on loopback ports until the test ends and
// returns a client of it; stop ends the server early (a lost quorum).
func Start(t *testing.T) (cli *clientv3.Client, stop func()) {
	t.Helper()

	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var once sync.Once

	stop = func() { once.Do(e.Close) }
	t.Cleanup(stop)

	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("etcd did not become ready")
	}

	cli, err = clientv3.New(clientv3.Config{Endpoints: []string{client.Host}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() }) //nolint:errcheck // the test is done

	return cli, stop
}

func freeURL(t *testing.T) url.URL {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
