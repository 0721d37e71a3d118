package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

// startEtcd runs a one-member etcd on loopback ports for the test.
func startEtcd(t testing.TB) (e *embed.Etcd, stop func()) {
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

	t.Cleanup(func() { once.Do(e.Close) })
	stop = func() { once.Do(e.Close) }

	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("etcd did not become ready")
	}

	return e, stop
}

func freeURL(t testing.TB) url.URL {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	defer l.Close()

	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

func newClient(t testing.TB, e *embed.Etcd) *clientv3.Client {
	t.Helper()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() })

	return cli
}

func TestConformance(t *testing.T) {
	e, _ := startEtcd(t)
	cli := newClient(t, e)
	prefixes := map[tokenstore.Store]string{}
	n := 0

	open := func(t *testing.T, prefix string, maxRecords int) tokenstore.Store {
		s, err := etcdstore.New(etcdstore.Config{Client: cli, Prefix: prefix, MaxRecords: maxRecords})
		if err != nil {
			t.Fatal(err)
		}

		prefixes[s] = prefix

		return s
	}

	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T, maxRecords int) tokenstore.Store {
			n++

			return open(t, fmt.Sprintf("/test/%d/", n), maxRecords)
		},
		Reopen: func(t *testing.T, old tokenstore.Store) tokenstore.Store {
			return open(t, prefixes[old], 0)
		},
	})
}

// TestUnavailable checks that a store whose etcd is gone refuses with
// ErrUnavailable within its timeout instead of hanging or answering.
func TestUnavailable(t *testing.T) {
	e, stop := startEtcd(t)
	cli := newClient(t, e)

	s, err := etcdstore.New(etcdstore.Config{Client: cli, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	if err = s.Create(ctx, storetest.NewRecord(t, "abc123", 0, 1)); err != nil {
		t.Fatal(err)
	}

	stop()

	for name, op := range map[string]func() error{
		"get":    func() error { _, err := s.Get(ctx, "abc123"); return err },
		"use":    func() error { _, err := s.Use(ctx, "abc123", testutil.Epoch); return err },
		"list":   func() error { _, err := s.List(ctx); return err },
		"create": func() error { return s.Create(ctx, storetest.NewRecord(t, "def456", 0, 1)) },
	} {
		if err := op(); !errors.Is(err, tokenstore.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
}
