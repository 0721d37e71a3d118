package revocation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/revocation"
)

func TestStore(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(t0)
	ctx := context.Background()

	s, err := revocation.NewStore(revocation.StoreConfig{Client: cli, Max: 2, Clock: clk, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("revoke once, the first record kept", func(t *testing.T) {
		first := entry("a1", time.Hour)
		first.Reason = "lost"

		if rev, err := s.Revoke(ctx, first); err != nil || rev.Existed {
			t.Fatalf("Revoke: existed %v, %v", rev.Existed, err)
		}

		rec, err := s.Revoke(ctx, entry("a1", 2*time.Hour))
		if err != nil || !rec.Existed || rec.Reason != "lost" {
			t.Fatalf("second Revoke: %+v, %v; want the first record", rec, err)
		}
	})

	t.Run("an expired certificate is refused", func(t *testing.T) {
		if _, err := s.Revoke(ctx, entry("e1", -time.Minute)); !errors.Is(err, revocation.ErrBadEntry) {
			t.Fatalf("Revoke of an expired certificate: %v, want ErrBadEntry", err)
		}
	})

	t.Run("bounded, room made by pruning", func(t *testing.T) {
		if _, err := s.Revoke(ctx, entry("a2", 2*time.Hour)); err != nil {
			t.Fatal(err)
		}

		if _, err := s.Revoke(ctx, entry("a3", 3*time.Hour)); !errors.Is(err, revocation.ErrFull) {
			t.Fatalf("a third revocation in a list of two: %v, want ErrFull", err)
		}

		clk.Advance(time.Hour + time.Second) // a1 expires

		if _, err := s.Revoke(ctx, entry("a3", 3*time.Hour)); err != nil {
			t.Fatalf("with a1 expired: %v", err)
		}

		got, err := s.List(ctx)
		if err != nil || fmt.Sprint(serials(got)) != "[a2 a3]" {
			t.Fatalf("List: %v, %v; want [a2 a3]", serials(got), err)
		}
	})

	t.Run("follow sees a revocation", func(t *testing.T) {
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()

		lists := make(chan []revocation.Entry, 10)
		go s.Follow(fctx, func(e []revocation.Entry, _ int64) { lists <- e })

		if got := <-lists; fmt.Sprint(serials(got)) != "[a2 a3]" {
			t.Fatalf("first list %v", serials(got))
		}

		// Prune to make room, then revoke: the follower sees the new list.
		clk.Advance(time.Hour)

		if _, err := s.Revoke(ctx, entry("b1", 4*time.Hour)); err != nil {
			t.Fatal(err)
		}

		for got := range lists {
			if fmt.Sprint(serials(got)) == "[a3 b1]" {
				break
			}
		}
	})

	t.Run("prune drops an unreadable entry", func(t *testing.T) {
		if _, err := cli.Put(ctx, revocation.DefaultPrefix+"ff", "not an entry"); err != nil {
			t.Fatal(err)
		}

		if n, err := s.Prune(ctx); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want the unreadable entry alone deleted", n, err)
		}

		if resp, err := cli.Get(ctx, revocation.DefaultPrefix+"ff"); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("the unreadable entry is still there (%v)", err)
		}
	})

	t.Run("fails closed without etcd", func(t *testing.T) {
		stop()

		if _, err := s.Revoke(ctx, entry("c1", 5*time.Hour)); !errors.Is(err, revocation.ErrUnavailable) {
			t.Fatalf("Revoke without etcd: %v, want ErrUnavailable", err)
		}

		if _, err := s.List(ctx); !errors.Is(err, revocation.ErrUnavailable) {
			t.Fatalf("List without etcd: %v, want ErrUnavailable", err)
		}

		if _, err := s.Prune(ctx); !errors.Is(err, revocation.ErrUnavailable) {
			t.Fatalf("Prune without etcd: %v, want ErrUnavailable", err)
		}
	})
}
