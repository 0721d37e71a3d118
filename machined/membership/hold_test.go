package membership_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// readEntry is the entry at address and its key's lease and mod revision;
// nil when there is none.
func readEntry(t *testing.T, cli *clientv3.Client, address string) (*membership.Member, clientv3.LeaseID, int64) {
	t.Helper()

	resp, err := cli.Get(context.Background(), "/aegis/members/"+address)
	if err != nil {
		t.Fatal(err)
	}

	if len(resp.Kvs) == 0 {
		return nil, 0, 0
	}

	m := &membership.Member{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, m); err != nil {
		t.Fatal(err)
	}

	return m, clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].ModRevision
}

// advanceUntil moves clk on by membership.HoldSweep, letting the sweep run
// each time, until done says so or limit has passed.
func advanceUntil(t *testing.T, clk *clock.Fake, limit time.Duration, done func() bool) bool {
	t.Helper()

	for passed := time.Duration(0); passed <= limit; passed += membership.HoldSweep {
		if err := clk.WaitForTimers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}

		clk.Advance(membership.HoldSweep)

		// The sweep's deletes are etcd calls: give them a moment.
		for range 50 {
			if done() {
				return true
			}

			time.Sleep(2 * time.Millisecond)
		}
	}

	return done()
}

// TestHold: an entry held for its connection is written once under the
// Store's session lease, with the held interval, and costs etcd nothing
// while it stays unchanged; it leaves the list a grace after its
// connection closed, or when its certificate expires, unless another
// control plane took it over meanwhile; a session lost is made again and
// its entries written back; and no write of another kind revokes the
// session under the entries it holds.
func TestHold(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	hold := func(t *testing.T, s *membership.Store, m *membership.Member, conn context.Context) {
		t.Helper()

		if err := s.Hold(ctx, m, membership.RoleWorker, membership.HoldTerms{Closing: conn}); err != nil {
			t.Fatalf("Hold %s: %v", m.GetHostname(), err)
		}
	}

	conn1, close1 := context.WithCancel(ctx)
	defer close1()

	w1 := entry("worker-1", "10.0.0.5")
	hold(t, s, w1, conn1)

	got, session, rev := readEntry(t, cli, "10.0.0.5")

	t.Run("written held, under the session", func(t *testing.T) {
		if got == nil || !got.GetHeld() || got.GetInterval().AsDuration() != membership.HeldInterval || got.GetRole() != membership.RoleWorker {
			t.Fatalf("entry = %v", got)
		}

		ttl, err := cli.TimeToLive(ctx, session)
		if err != nil || ttl.GrantedTTL != int64(membership.SessionTTL/time.Second) {
			t.Fatalf("session lease %x: %+v %v; want a TTL of %s", session, ttl, err, membership.SessionTTL)
		}

		if membership.Holding(s) != 1 {
			t.Fatalf("Holding = %d, want 1", membership.Holding(s))
		}
	})

	t.Run("heartbeats on the open connection write nothing", func(t *testing.T) {
		for range 3 {
			clk.Advance(time.Minute)
			hold(t, s, entry("worker-1", "10.0.0.5"), conn1)
		}

		if _, _, now := readEntry(t, cli, "10.0.0.5"); now != rev {
			t.Fatalf("revision %d, want %d: the entry was written again", now, rev)
		}
	})

	t.Run("listed long past its own interval's age-out", func(t *testing.T) {
		list, err := s.List(ctx)
		if err != nil || len(list) != 1 || list[0].GetHostname() != "worker-1" {
			t.Fatalf("List = %v, %v", list, err)
		}
	})

	t.Run("a change is written at once", func(t *testing.T) {
		changed := entry("worker-1", "10.0.0.5")
		changed.Version = "v1.0.1"
		hold(t, s, changed, conn1)

		got, lease, now := readEntry(t, cli, "10.0.0.5")
		if got.GetVersion() != "v1.0.1" || lease != session || now == rev {
			t.Fatalf("entry %v under %x at %d", got, lease, now)
		}
	})

	conn2, close2 := context.WithCancel(ctx)
	defer close2()

	hold(t, s, entry("worker-2", "10.0.0.6"), conn2)

	t.Run("one session for every entry", func(t *testing.T) {
		if _, lease, _ := readEntry(t, cli, "10.0.0.6"); lease != session {
			t.Fatalf("worker-2 under %x, worker-1 under %x", lease, session)
		}
	})

	t.Run("the connection closed: the entry leaves after the grace", func(t *testing.T) {
		close1()

		grace := membership.AgeOut(w1.GetInterval().AsDuration())
		start := clk.Now()

		gone := advanceUntil(t, clk, grace+5*membership.HoldSweep, func() bool {
			m, _, _ := readEntry(t, cli, "10.0.0.5")

			return m == nil
		})
		if !gone {
			t.Fatal("the entry is still there")
		}

		if waited := clk.Now().Sub(start); waited < grace {
			t.Fatalf("deleted after %s, before the grace of %s", waited, grace)
		}

		if names, err := cli.Get(ctx, "/aegis/member-names/worker-1"); err != nil || len(names.Kvs) != 0 {
			t.Fatalf("name key: %v %v", names, err)
		}

		if m, _, _ := readEntry(t, cli, "10.0.0.6"); m == nil {
			t.Fatal("worker-2, whose connection is open, left too")
		}
	})

	other, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a worker that moved keeps its entry", func(t *testing.T) {
		conn3, close3 := context.WithCancel(ctx)
		defer close3()

		hold(t, other, entry("worker-2", "10.0.0.6"), conn3)
		close2()

		_, moved, _ := readEntry(t, cli, "10.0.0.6")
		if moved == session {
			t.Fatal("the other control plane wrote it under the first one's session")
		}

		grace := membership.AgeOut(time.Second)
		advanceUntil(t, clk, grace+5*membership.HoldSweep, func() bool { return membership.Holding(s) == 0 })

		if membership.Holding(s) != 0 {
			t.Fatalf("the first Store still holds %d", membership.Holding(s))
		}

		if m, lease, _ := readEntry(t, cli, "10.0.0.6"); m == nil || lease != moved {
			t.Fatalf("entry %v under %x, want it kept under %x", m, lease, moved)
		}
	})

	t.Run("a worker back from another control plane is written again", func(t *testing.T) {
		connA, closeA := context.WithCancel(ctx)
		defer closeA()

		hold(t, s, entry("worker-7", "10.0.0.11"), connA)
		_, first, _ := readEntry(t, cli, "10.0.0.11")

		// To the other control plane, and back on a new connection before
		// the first one's grace ended.
		connB, closeB := context.WithCancel(ctx)
		hold(t, other, entry("worker-7", "10.0.0.11"), connB)
		closeA()

		connC, closeC := context.WithCancel(ctx)
		defer closeC()

		hold(t, s, entry("worker-7", "10.0.0.11"), connC)

		if _, lease, _ := readEntry(t, cli, "10.0.0.11"); lease != first {
			t.Fatalf("back under %x, want the first session %x", lease, first)
		}

		// The other control plane's hold ends: the entry stays.
		closeB()
		advanceUntil(t, clk, membership.AgeOut(time.Second)+5*membership.HoldSweep, func() bool { return membership.Holding(other) == 0 })

		if m, lease, _ := readEntry(t, cli, "10.0.0.11"); m == nil || lease != first {
			t.Fatalf("entry %v under %x after the other hold ended, want it under %x", m, lease, first)
		}
	})

	t.Run("held no longer than its certificate", func(t *testing.T) {
		conn, done := context.WithCancel(ctx)
		defer done()

		terms := membership.HoldTerms{Closing: conn, NotAfter: clk.Now().Add(10 * time.Second)}
		if err := s.Hold(ctx, entry("worker-3", "10.0.0.7"), membership.RoleWorker, terms); err != nil {
			t.Fatal(err)
		}

		if !advanceUntil(t, clk, 15*time.Second, func() bool { m, _, _ := readEntry(t, cli, "10.0.0.7"); return m == nil }) {
			t.Fatal("the entry outlived the certificate")
		}
	})

	t.Run("a session lost is made again, its entries written back", func(t *testing.T) {
		conn, done := context.WithCancel(ctx)
		defer done()

		hold(t, s, entry("worker-4", "10.0.0.8"), conn)

		_, lost, _ := readEntry(t, cli, "10.0.0.8")
		if _, err := cli.Revoke(ctx, lost); err != nil {
			t.Fatal(err)
		}

		deadline := time.Now().Add(10 * time.Second)

		for {
			m, lease, _ := readEntry(t, cli, "10.0.0.8")
			if m != nil && lease != lost && lease != 0 {
				break
			}

			if time.Now().After(deadline) {
				t.Fatalf("not written back: %v under %x", m, lease)
			}

			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("held is never taken from the node", func(t *testing.T) {
		claimed := entry("worker-8", "10.0.0.12")
		claimed.Held = true

		if err := s.Put(ctx, claimed, membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if m, _, _ := readEntry(t, cli, "10.0.0.12"); m == nil || m.GetHeld() {
			t.Fatalf("a plain heartbeat claiming held wrote %v", m)
		}
	})

	t.Run("neither a plain heartbeat nor a leave revokes the session", func(t *testing.T) {
		conn, done := context.WithCancel(ctx)
		defer done()

		hold(t, s, entry("worker-5", "10.0.0.9"), conn)
		hold(t, s, entry("worker-6", "10.0.0.10"), conn)

		_, session, _ := readEntry(t, cli, "10.0.0.9")

		if err := s.Put(ctx, entry("worker-5", "10.0.0.9"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if m, lease, _ := readEntry(t, cli, "10.0.0.9"); m.GetHeld() || lease == session {
			t.Fatalf("after Put: %v under %x", m, lease)
		}

		hold(t, s, entry("worker-5", "10.0.0.9"), conn)

		if err := s.Delete(ctx, "10.0.0.9", membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if m, lease, _ := readEntry(t, cli, "10.0.0.10"); m == nil || lease != session {
			t.Fatalf("worker-6: %v under %x, want it kept under the session %x", m, lease, session)
		}

		ttl, err := cli.TimeToLive(ctx, session)
		if err != nil || ttl.TTL <= 0 {
			t.Fatalf("session: %+v %v", ttl, err)
		}
	})
}
