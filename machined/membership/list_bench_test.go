package membership_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// BenchmarkList10000 lists a member list of 10,000 entries from an etcd of
// its own, as `aegisctl get members` has a control plane do: the part of
// that command's time spent in the control plane, without the load of the
// workers around it. "read" reads every entry; "copy" answers from the
// copy a FollowChanges keeps, as a control plane's machined does.
func BenchmarkList10000(b *testing.B) {
	e, _ := etcdtest.Start(b)
	cli := etcdtest.Client(b, e)
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	const n = 10000

	putRaw(ctx, b, cli, clk.Now(), 0, n)

	for _, copied := range []bool{false, true} {
		name, cfg := "read", membership.Config{Client: cli, Clock: clk}
		if copied {
			name, cfg.Copy = "copy", membership.NewCopy()
		}

		b.Run(name, func(b *testing.B) {
			s, err := membership.New(cfg)
			if err != nil {
				b.Fatal(err)
			}

			if copied {
				_ = followed(b, s)
			}

			for b.Loop() {
				list, err := s.List(ctx)
				if err != nil || len(list) != n {
					b.Fatalf("List: %d entries, %v; want %d", len(list), err, n)
				}
			}
		})
	}
}

// followed runs s.FollowChanges, once it has read the list, until the
// function it returns is called or tb ends.
func followed(tb testing.TB, s *membership.Store) (stop func()) {
	tb.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	read := make(chan struct{})
	once := sync.OnceFunc(func() { close(read) })

	var wg sync.WaitGroup

	wg.Go(func() { s.FollowChanges(ctx, func([]membership.Change) { once() }) })

	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	tb.Cleanup(stop)

	select {
	case <-read:
	case <-time.After(eventTimeout):
		tb.Fatal("FollowChanges published nothing")
	}

	return stop
}
