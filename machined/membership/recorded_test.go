package membership_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// TestPutRenewsWhatItRecorded: a heartbeat that says what the entry the
// Store wrote says costs the lease's keep-alive alone, no read; one whose
// last_seen is due costs the keep-alive and the write, no read; an entry
// that left (its node's leave, its lease revoked) or was written behind
// the Store's back is read and written again.
func TestPutRenewsWhatItRecorded(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	kv := etcdtest.Count(cli)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	var keepAlives atomic.Int64

	membership.SetKeepAlive(s, func(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
		keepAlives.Add(1)

		return cli.KeepAliveOnce(ctx, id)
	})

	ctx := context.Background()
	const k = "/aegis/members/10.0.0.5"

	m := entry("worker-1", "10.0.0.5")
	interval := m.GetInterval().AsDuration()

	// beat sends one heartbeat an interval on, and returns the etcd reads
	// and transactions and the keep-alives it cost.
	beat := func() (reads, keeps int64) {
		t.Helper()

		clk.Advance(interval)

		g, x, a := kv.Gets.Load(), kv.Txns.Load(), keepAlives.Load()
		if err := s.Put(ctx, m, membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		return kv.Gets.Load() - g + kv.Txns.Load() - x, keepAlives.Load() - a
	}

	entryThere := func(when string) {
		t.Helper()

		got, err := cli.Get(ctx, k)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("%s: the entry: %v, %v", when, got, err)
		}
	}

	beat()
	entryThere("written")

	if reads, keeps := beat(); reads != 0 || keeps != 1 {
		t.Fatalf("an unchanged heartbeat cost %d reads or transactions and %d keep-alives, want 0 and 1", reads, keeps)
	}

	// The node left: its entry and lease are gone, and its next heartbeat
	// writes it again.
	if err := s.Delete(ctx, "10.0.0.5", membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	beat()
	entryThere("after a leave")

	// The lease revoked behind the Store's back: the keep-alive finds it
	// gone, and the entry is written again.
	got, err := cli.Get(ctx, k)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the entry: %v, %v", got, err)
	}

	if _, err := cli.Revoke(ctx, clientv3.LeaseID(got.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}

	if reads, _ := beat(); reads == 0 {
		t.Fatal("a heartbeat whose lease was revoked read nothing")
	}

	entryThere("after its lease was revoked")

	// Unchanged heartbeats until last_seen is due: then it is written.
	for range membership.RefreshIntervals - 1 {
		if reads, _ := beat(); reads != 0 {
			t.Fatalf("an unchanged heartbeat cost %d reads or transactions", reads)
		}
	}

	before, err := cli.Get(ctx, k)
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("the entry: %v, %v", before, err)
	}

	if txns, keeps := beat(); txns != 1 || keeps != 1 {
		t.Fatalf("the heartbeat with last_seen due cost %d reads or transactions and %d keep-alives, want 1 (its write) and 1", txns, keeps)
	}

	after, err := cli.Get(ctx, k)
	if err != nil || len(after.Kvs) != 1 || after.Kvs[0].ModRevision == before.Kvs[0].ModRevision {
		t.Fatalf("last_seen due, the entry was not written: %v, %v", after, err)
	}

	if lease := after.Kvs[0].Lease; lease != before.Kvs[0].Lease {
		t.Fatalf("last_seen written under lease %x, want the entry's own %x", lease, before.Kvs[0].Lease)
	}

	// The entry written behind the Store's back, under its own lease (as
	// another control plane would, after the node moved there and back):
	// the keep-alives go on, and the write of last_seen finds the change,
	// reads, and writes over what it read.
	if _, err := cli.Put(ctx, k, string(after.Kvs[0].Value), clientv3.WithLease(clientv3.LeaseID(after.Kvs[0].Lease))); err != nil {
		t.Fatal(err)
	}

	for range membership.RefreshIntervals - 1 {
		if reads, _ := beat(); reads != 0 {
			t.Fatalf("an unchanged heartbeat cost %d reads or transactions", reads)
		}
	}

	behind, err := cli.Get(ctx, k)
	if err != nil || len(behind.Kvs) != 1 {
		t.Fatalf("the entry: %v, %v", behind, err)
	}

	if txns, _ := beat(); txns < 3 {
		t.Fatalf("last_seen due over an entry written behind the Store's back cost %d reads or transactions, "+
			"want the failed write, a read and the write", txns)
	}

	last, err := cli.Get(ctx, k)
	if err != nil || len(last.Kvs) != 1 || last.Kvs[0].ModRevision == behind.Kvs[0].ModRevision {
		t.Fatalf("last_seen due over an entry written behind the Store's back: not written: %v, %v", last, err)
	}
}
