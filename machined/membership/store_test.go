package membership_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

func TestStore(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()

	for _, put := range []struct {
		m    *membership.Member
		role string
	}{
		{entry("cp-1", "10.0.0.1"), membership.RoleControlPlane},
		{entry("worker-1", "10.0.0.5"), membership.RoleWorker},
	} {
		if err := s.Put(ctx, put.m, put.role); err != nil {
			t.Fatalf("Put %s: %v", put.m.GetHostname(), err)
		}
	}

	t.Run("listed with role and last seen", func(t *testing.T) {
		list, err := s.List(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("List: %v %v", list, err)
		}

		if list[0].GetHostname() != "cp-1" || list[0].GetRole() != membership.RoleControlPlane ||
			list[1].GetRole() != membership.RoleWorker || !list[1].GetLastSeen().AsTime().Equal(clk.Now()) {
			t.Fatalf("List = %v", list)
		}
	})

	t.Run("worker cannot take a control plane's entry", func(t *testing.T) {
		err := s.Put(ctx, entry("cp-1", "10.0.0.1"), membership.RoleWorker)
		if !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("err = %v, want ErrNotOwner", err)
		}
	})

	t.Run("worker cannot remove a control plane's entry", func(t *testing.T) {
		err := s.Delete(ctx, "10.0.0.1", membership.RoleWorker)
		if !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("err = %v, want ErrNotOwner", err)
		}
	})

	t.Run("hostname held by another live node", func(t *testing.T) {
		err := s.Put(ctx, entry("worker-1", "10.0.0.6"), membership.RoleWorker)
		if !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("err = %v, want ErrNotOwner", err)
		}
	})

	t.Run("an unchanged entry is written again once last_seen is old", func(t *testing.T) {
		written := clk.Now()

		before, err := cli.Get(ctx, "/aegis/members/10.0.0.5")
		if err != nil || len(before.Kvs) != 1 {
			t.Fatalf("entry: %v %v", before, err)
		}

		// A heartbeat with nothing new renews the lease and writes nothing.
		clk.Advance(time.Second)

		if err := s.Put(ctx, entry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		after, err := cli.Get(ctx, "/aegis/members/10.0.0.5")
		if err != nil || len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
			t.Fatalf("an unchanged heartbeat wrote the entry: revision %d → %v (%v)", before.Kvs[0].ModRevision, after.Kvs, err)
		}

		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(after.Kvs[0].Lease))
		if err != nil || ttl.TTL < ttl.GrantedTTL-1 {
			t.Fatalf("the lease was not renewed: %v %v", ttl, err)
		}

		list, _ := s.List(ctx)
		if len(list) != 2 || !list[1].GetLastSeen().AsTime().Equal(written) {
			t.Fatalf("List = %v", list)
		}

		// One whose last_seen is LastSeenRefresh old is written.
		clk.Advance(membership.LastSeenRefresh(time.Second))

		if err := s.Put(ctx, entry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		list, _ = s.List(ctx)
		if len(list) != 2 || !list[1].GetLastSeen().AsTime().Equal(clk.Now()) {
			t.Fatalf("List after a refresh = %v", list)
		}
	})

	t.Run("removed entry gone at once, twice is fine", func(t *testing.T) {
		if err := s.Put(ctx, entry("worker-2", "10.0.0.7"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		for range 2 {
			if err := s.Delete(ctx, "10.0.0.7", membership.RoleWorker); err != nil {
				t.Fatal(err)
			}
		}

		list, _ := s.List(ctx)
		if len(list) != 2 || slices.ContainsFunc(list, func(m *membership.Member) bool { return m.GetHostname() == "worker-2" }) {
			t.Fatalf("List after the removal = %v", list)
		}
	})

	t.Run("stale entries aged out", func(t *testing.T) {
		clk.Advance(membership.StaleAfter(time.Second) + time.Millisecond)

		if err := s.Put(ctx, entry("cp-1", "10.0.0.1"), membership.RoleControlPlane); err != nil {
			t.Fatal(err)
		}

		list, err := s.List(ctx)
		if err != nil || len(list) != 1 || list[0].GetHostname() != "cp-1" {
			t.Fatalf("List after worker-1's age-out = %v %v", list, err)
		}

		// Its name is free again.
		if err := s.Put(ctx, entry("worker-1", "10.0.0.6"), membership.RoleWorker); err != nil {
			t.Fatalf("hostname of an aged-out entry: %v", err)
		}
	})

	t.Run("damaged entry skipped", func(t *testing.T) {
		if _, err := cli.Put(ctx, "/aegis/members/10.0.0.9", "not a member"); err != nil {
			t.Fatal(err)
		}

		list, err := s.List(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("List = %v %v", list, err)
		}

		// The node it belongs to writes over it.
		if err := s.Put(ctx, entry("worker-9", "10.0.0.9"), membership.RoleWorker); err != nil {
			t.Fatalf("Put over a damaged entry: %v", err)
		}
	})

	t.Run("one lease per entry", func(t *testing.T) {
		leases, err := cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}

		resp, err := cli.Get(ctx, "/aegis/members/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}

		if len(leases.Leases) != len(resp.Kvs) {
			t.Fatalf("%d leases for %d entries: a refreshed entry left its old lease behind", len(leases.Leases), len(resp.Kvs))
		}
	})

	t.Run("a refresh keeps the entry's lease", func(t *testing.T) {
		before, err := cli.Get(ctx, "/aegis/members/10.0.0.9")
		if err != nil || len(before.Kvs) != 1 {
			t.Fatalf("entry: %v %v", before, err)
		}

		clk.Advance(membership.LastSeenRefresh(time.Second))

		if err := s.Put(ctx, entry("worker-9", "10.0.0.9"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		after, err := cli.Get(ctx, "/aegis/members/10.0.0.9")
		if err != nil || len(after.Kvs) != 1 {
			t.Fatalf("entry: %v %v", after, err)
		}

		if after.Kvs[0].Lease != before.Kvs[0].Lease || after.Kvs[0].ModRevision != before.Header.Revision+1 {
			t.Fatalf("lease %x → %x, revision %d → %d: want the same lease and one write",
				before.Kvs[0].Lease, after.Kvs[0].Lease, before.Header.Revision, after.Kvs[0].ModRevision)
		}
	})

	t.Run("a new interval moves the entry to a new lease", func(t *testing.T) {
		before, err := cli.Get(ctx, "/aegis/members/10.0.0.9")
		if err != nil || len(before.Kvs) != 1 {
			t.Fatalf("entry: %v %v", before, err)
		}

		m := entry("worker-9", "10.0.0.9")
		m.Interval = durationpb.New(2 * time.Second)

		if err := s.Put(ctx, m, membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		after, err := cli.Get(ctx, "/aegis/members/10.0.0.9")
		if err != nil || len(after.Kvs) != 1 || after.Kvs[0].Lease == before.Kvs[0].Lease {
			t.Fatalf("entry %v %v: want a new lease", after, err)
		}

		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(after.Kvs[0].Lease))
		if err != nil || ttl.GrantedTTL != int64(membership.AgeOut(2*time.Second).Seconds()) {
			t.Fatalf("lease TTL %v %v, want the new age-out", ttl, err)
		}

		leases, err := cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for _, l := range leases.Leases {
			if l.ID == clientv3.LeaseID(before.Kvs[0].Lease) {
				t.Fatal("the old lease was not revoked")
			}
		}
	})

	t.Run("lease drops the entry in etcd", func(t *testing.T) {
		resp, err := cli.Get(ctx, "/aegis/members/10.0.0.1")
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
			t.Fatalf("entry without a lease: %v %v", resp, err)
		}

		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil || ttl.GrantedTTL != int64(membership.AgeOut(time.Second).Seconds()) {
			t.Fatalf("lease TTL %v %v, want the age-out", ttl, err)
		}
	})
}

// A keep-alive that fails for any reason but a lease that is gone refuses
// the heartbeat and writes nothing: no new lease, no transaction. One
// whose lease is gone writes the entry again under a new lease.
func TestPutKeepAliveFailureWritesNothing(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	const k = "/aegis/members/10.0.0.5"

	if err := s.Put(ctx, entry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	read := func() (rev int64, lease clientv3.LeaseID) {
		t.Helper()

		got, err := cli.Get(ctx, k)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("entry: %v %v", got, err)
		}

		return got.Kvs[0].ModRevision, clientv3.LeaseID(got.Kvs[0].Lease)
	}

	leases := func() int {
		t.Helper()

		got, err := cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}

		return len(got.Leases)
	}

	rev, lease := read()
	held := leases()

	var calls int

	membership.SetKeepAlive(s, func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
		calls++

		return nil, status.Error(codes.Unavailable, "etcdserver: too many requests")
	})

	for _, tt := range []struct {
		name    string
		advance time.Duration
	}{
		{"a heartbeat with nothing new", time.Second},
		{"one whose last_seen is due to be written", membership.LastSeenRefresh(time.Second)},
	} {
		clk.Advance(tt.advance)

		calls = 0

		err := s.Put(ctx, entry("worker-1", "10.0.0.5"), membership.RoleWorker)
		if !errors.Is(err, membership.ErrUnavailable) || calls != 1 {
			t.Fatalf("%s: Put = %v after %d keep-alives, want ErrUnavailable after one", tt.name, err, calls)
		}

		if r, l := read(); r != rev || l != lease || leases() != held {
			t.Fatalf("%s: a failed keep-alive wrote: revision %d → %d, lease %x → %x, %d leases → %d",
				tt.name, rev, r, lease, l, held, leases())
		}
	}

	// A lease that is gone is no failure: the entry is written anew.
	membership.SetKeepAlive(s, cli.KeepAliveOnce)

	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, entry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
		t.Fatalf("Put after the lease was revoked: %v", err)
	}

	if _, l := read(); l == lease || l == 0 {
		t.Fatalf("the entry was not written under a new lease: %x", l)
	}
}
