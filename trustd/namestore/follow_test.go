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
