package membership_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// TestListWhole: a list of more entries than one page of a read is read
// whole, by List and by Follow, at one revision.
func TestListWhole(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	const n = 1234 // two full pages of 500 and a part

	putRaw(ctx, t, cli, clk.Now(), 0, n)

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	list, err := s.List(ctx)
	if err != nil || len(list) != n {
		t.Fatalf("List: %d entries, %v; want %d", len(list), err, n)
	}

	got := make(chan int, 1)

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()

	go s.Follow(fctx, func(ms []*membership.Member) {
		select {
		case got <- len(ms):
		default:
		}
	})

	select {
	case l := <-got:
		if l != n {
			t.Fatalf("Follow published %d entries, want %d", l, n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow published nothing")
	}
}

// TestListFull: a new entry in a full list is refused, a listed one is
// refreshed, and a list past twice the bound is refused to readers rather
// than handed back in part.
func TestListFull(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	s, err := membership.New(membership.Config{Client: cli, Clock: clk, MaxMembers: 3})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		if err := s.Put(ctx, entry(fmt.Sprintf("worker-%d", i), fmt.Sprintf("10.0.0.%d", i+1)), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}
	}

	err = s.Put(ctx, entry("worker-3", "10.0.0.4"), membership.RoleWorker)
	if !errors.Is(err, membership.ErrFull) {
		t.Fatalf("a fourth entry in a list of 3: %v, want ErrFull", err)
	}

	clk.Advance(membership.LastSeenRefresh(time.Second))

	if err := s.Put(ctx, entry("worker-0", "10.0.0.1"), membership.RoleWorker); err != nil {
		t.Fatalf("a listed entry's refresh in a full list: %v", err)
	}

	if err := s.Delete(ctx, "10.0.0.2", membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, entry("worker-3", "10.0.0.4"), membership.RoleWorker); err != nil {
		t.Fatalf("a new entry once one left: %v", err)
	}

	// Keys no Put admitted, past twice the bound.
	putRaw(ctx, t, cli, clk.Now(), 100, 4)

	if list, err := s.List(ctx); !errors.Is(err, membership.ErrFull) {
		t.Fatalf("List of 7 entries with a bound of 3: %d entries, %v; want ErrFull", len(list), err)
	}
}

// putRaw writes n valid entries straight to etcd, from address 10.1.x.y
// for x.y counting from first.
func putRaw(ctx context.Context, t testing.TB, cli *clientv3.Client, now time.Time, first, n int) {
	t.Helper()

	var g errgroup.Group

	g.SetLimit(16)

	for i := first; i < first+n; i++ {
		g.Go(func() error {
			m := entry(fmt.Sprintf("hollow-%05d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
			m.Role, m.LastSeen = membership.RoleWorker, timestamppb.New(now)

			data, err := proto.Marshal(m)
			if err != nil {
				return err
			}

			_, err = cli.Put(ctx, "/aegis/members/"+m.GetAddresses()[0], string(data))

			return err
		})
	}

	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestNewEntriesCountedOncePerCountFresh: a storm of new entries costs
// etcd one count of the list per CountFresh, not one each; the entries
// this Store admitted since count against the bound at once, and those
// others wrote from the next count on.
func TestNewEntriesCountedOncePerCountFresh(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	kv := etcdtest.Count(cli)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	s, err := membership.New(membership.Config{Client: cli, Clock: clk, MaxMembers: 5})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		if err := s.Put(ctx, entry(fmt.Sprintf("worker-%d", i), fmt.Sprintf("10.0.0.%d", i+1)), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}
	}

	if n := kv.CountOnly.Load(); n != 1 {
		t.Fatalf("three new entries within CountFresh counted the list %d times, want once", n)
	}

	// Two entries another control plane wrote: not counted yet, so a
	// fourth of this Store's is admitted; then the count is read again.
	putRaw(ctx, t, cli, clk.Now(), 0, 2)

	if err := s.Put(ctx, entry("worker-3", "10.0.0.4"), membership.RoleWorker); err != nil {
		t.Fatalf("a fourth entry with the count at three of five: %v", err)
	}

	clk.Advance(membership.CountFresh)

	err = s.Put(ctx, entry("worker-4", "10.0.0.5"), membership.RoleWorker)
	if !errors.Is(err, membership.ErrFull) {
		t.Fatalf("a new entry in a list of six with a bound of five: %v, want ErrFull", err)
	}

	if n := kv.CountOnly.Load(); n != 2 {
		t.Fatalf("the list was counted %d times, want twice (once per CountFresh)", n)
	}
}
