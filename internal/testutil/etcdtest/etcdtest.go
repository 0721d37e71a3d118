// Package etcdtest runs a real etcd (one member, or a cluster), in process,
// for the tests of the stores Aegis keeps in etcd.
package etcdtest

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyTimeout bounds etcd's start: a member with an empty data directory
// elects itself in well under a second, even on a loaded machine.
const readyTimeout = time.Minute

// Start runs a one-member etcd on free loopback ports until the test ends;
// stop ends it early (a test of the store without quorum), and may be
// called more than once.
func Start(tb testing.TB) (e *embed.Etcd, stop func()) {
	tb.Helper()

	m := StartCluster(tb, 1)[0]

	return m.Etcd, m.Stop
}

// Member is one member of a cluster StartCluster runs.
type Member struct {
	Etcd *embed.Etcd
	// Stop ends the member early (its cluster then elects another leader,
	// or loses quorum); it may be called more than once.
	Stop func()
}

// StartCluster runs an n-member etcd on free loopback ports until the test
// ends, each member in process, and waits until every member is ready.
func StartCluster(tb testing.TB, n int) []Member {
	tb.Helper()

	cfgs := make([]*embed.Config, n)

	var initial []string

	for i := range cfgs {
		cfg := embed.NewConfig()
		cfg.Name = "m" + strconv.Itoa(i)
		cfg.Dir = tb.TempDir()
		cfg.Logger, cfg.LogLevel = "zap", "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

		client, peer := freeURL(tb), freeURL(tb)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		initial = append(initial, cfg.Name+"="+peer.String())
		cfgs[i] = cfg
	}

	members := make([]Member, n)

	for i, cfg := range cfgs {
		cfg.InitialCluster = strings.Join(initial, ",")

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			tb.Fatal(err)
		}

		var once sync.Once

		members[i] = Member{Etcd: e, Stop: func() { once.Do(e.Close) }}
		tb.Cleanup(members[i].Stop)
	}

	for _, m := range members {
		select {
		case <-m.Etcd.Server.ReadyNotify():
		case <-time.After(readyTimeout):
			tb.Fatal("etcd did not become ready")
		}
	}

	return members
}

// Client returns a client of e, closed when the test ends.
func Client(tb testing.TB, e *embed.Etcd) *clientv3.Client {
	tb.Helper()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		tb.Fatal(err)
	}

	tb.Cleanup(func() { _ = cli.Close() })

	return cli
}

func freeURL(tb testing.TB) url.URL {
	tb.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}

	defer l.Close()

	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
