package etcdutil_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

// TestLeader runs a three-member etcd: Leader finds the member that leads
// and renews leases there; once that member stops, keep-alives still
// succeed (through the cluster's client) and Leader finds the new leader.
func TestLeader(t *testing.T) {
	members := etcdtest.StartCluster(t, 3)

	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.Etcd.Config().AdvertiseClientUrls[0].String())
	}

	dial := func(eps ...string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	}

	cluster, err := dial(endpoints...)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = cluster.Close() })

	var (
		mu      sync.Mutex
		dialled []string
	)

	l := etcdutil.NewLeader(cluster, func(ep string) (*clientv3.Client, error) {
		mu.Lock()
		defer mu.Unlock()

		dialled = append(dialled, ep)

		return dial(ep)
	}, nil)
	t.Cleanup(func() { _ = l.Close() })

	ctx := context.Background()

	lease, err := cluster.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}

	// The first keep-alive goes through the cluster while Leader asks.
	renew := func(what string) {
		t.Helper()

		resp, err := l.KeepAliveOnce(ctx, lease.ID)
		if err != nil || resp.TTL != 30 {
			t.Fatalf("%s: KeepAliveOnce = %v, %v", what, resp, err)
		}
	}

	renew("before the leader is known")

	lead := leaderOf(t, members)
	waitFor(t, func() bool { return l.Endpoint() == endpoint(lead) }, "Leader to find "+endpoint(lead))

	renew("at the leader")

	// A lease that is gone is not found, and says so.
	if _, err := l.KeepAliveOnce(ctx, lease.ID+1000); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("KeepAliveOnce of a lease that is not = %v, want ErrLeaseNotFound", err)
	}

	// The leader stops: the next keep-alive fails there, goes through the
	// cluster, and Leader finds the member elected after it.
	for _, m := range members {
		if m.Etcd == lead {
			m.Stop()
		}
	}

	waitFor(t, func() bool {
		_, err := l.KeepAliveOnce(ctx, lease.ID)

		return err == nil
	}, "a keep-alive once the leader stopped")

	next := leaderOf(t, members)
	waitFor(t, func() bool {
		_, _ = l.KeepAliveOnce(ctx, lease.ID)

		return l.Endpoint() == endpoint(next)
	}, "Leader to find the new leader "+endpoint(next))

	renew("at the new leader")

	mu.Lock()
	defer mu.Unlock()

	if len(dialled) != 2 {
		t.Fatalf("dialled %v, want the first leader and the second", dialled)
	}
}

func endpoint(e *embed.Etcd) string { return e.Config().AdvertiseClientUrls[0].String() }

// leaderOf is the running member that leads, once one does.
func leaderOf(t *testing.T, members []etcdtest.Member) *embed.Etcd {
	t.Helper()

	var lead *embed.Etcd

	waitFor(t, func() bool {
		for _, m := range members {
			select {
			case <-m.Etcd.Server.StopNotify():
				continue
			default:
			}

			if m.Etcd.Server.Leader() == m.Etcd.Server.MemberID() {
				lead = m.Etcd

				return true
			}
		}

		return false
	}, "a leader")

	return lead
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()

	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}

		time.Sleep(50 * time.Millisecond)
	}
}
