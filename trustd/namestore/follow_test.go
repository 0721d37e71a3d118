package namestore_test

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// TestFollowHolders: the addresses of the live bindings are given, those
// bound before the follow began and those bound after; an ended binding's
// are not.
func TestFollowHolders(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(time.Now())
	ctx, cancel := context.WithCancel(context.Background())

	s, err := namestore.New(namestore.Config{Client: etcdtest.Client(t, e), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Bind(ctx, binding("worker-1", "10.0.0.1", clk.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}

	if err := s.Bind(ctx, binding("worker-2", "10.0.0.2", clk.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}

	clk.Advance(2 * time.Second) // worker-2's binding has ended

	var (
		mu    sync.Mutex
		known = map[netip.Addr]bool{}
		wg    sync.WaitGroup
	)

	has := func(a string) bool {
		mu.Lock()
		defer mu.Unlock()

		return known[addr(a)]
	}

	wg.Go(func() {
		s.FollowHolders(ctx, slog.New(slog.DiscardHandler), func(a netip.Addr) {
			mu.Lock()
			known[a] = true
			mu.Unlock()
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	waitFor := func(a string) {
		t.Helper()

		for deadline := time.Now().Add(10 * time.Second); !has(a); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s was never given", a)
			}
		}
	}

	waitFor("10.0.0.1")

	if err := s.Bind(ctx, binding("worker-3", "10.0.0.3", clk.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}

	waitFor("10.0.0.3")

	if has("10.0.0.2") {
		t.Fatal("the address of an ended binding was given")
	}
}

// TestEnsureFromTheFollowedBindings: while FollowHolders runs, a
// heartbeat's binding that is already recorded costs no read of etcd; a
// renewal's later end still writes, and a binding released is bound again
// rather than taken as held.
func TestEnsureFromTheFollowedBindings(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	kv := etcdtest.Count(cli)

	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(time.Now())

	s, err := namestore.New(namestore.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	b := binding("worker-1", "10.0.0.1", clk.Now().Add(time.Hour))
	if err := s.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}

	var (
		wg     sync.WaitGroup
		follow = make(chan struct{}, 1)
	)

	wg.Go(func() {
		s.FollowHolders(ctx, slog.New(slog.DiscardHandler), func(netip.Addr) {
			select {
			case follow <- struct{}{}:
			default:
			}
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	select {
	case <-follow:
	case <-time.After(10 * time.Second):
		t.Fatal("the bindings were never followed")
	}

	// FollowHolders gives the addresses it read before it starts its
	// watch: wait until a heartbeat is answered without a read.
	answered := func() bool {
		before := kv.Gets.Load()
		if err := s.Ensure(ctx, b); err != nil {
			t.Fatal(err)
		}

		return kv.Gets.Load() == before
	}

	for deadline := time.Now().Add(10 * time.Second); !answered(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("every Ensure of a recorded binding read etcd")
		}
	}

	// A renewal ends later: it is written.
	renewed := binding("worker-1", "10.0.0.1", clk.Now().Add(2*time.Hour))
	before := kv.Gets.Load()

	if err := s.Ensure(ctx, renewed); err != nil || kv.Gets.Load() == before {
		t.Fatalf("Ensure of a renewal: %v, %d reads", err, kv.Gets.Load()-before)
	}

	// Released: once the watch has seen it, Ensure binds the name again.
	if err := s.Release(ctx, "worker-1", []netip.Addr{addr("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}

	for deadline := time.Now().Add(10 * time.Second); answered(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a released binding was still taken as held")
		}
	}

	resp, err := cli.Get(ctx, namestore.DefaultPrefix+"worker-1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the binding after Ensure of a released name: %v, %v", resp, err)
	}
}
