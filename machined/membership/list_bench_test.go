package membership_test

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// BenchmarkList10000 reads a member list of 10,000 entries from an etcd of
// its own, as `aegisctl get members` has a control plane do: the part of
// that command's time spent in the control plane, without the load of the
// workers around it.
func BenchmarkList10000(b *testing.B) {
	e, _ := etcdtest.Start(b)
	cli := etcdtest.Client(b, e)
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	const n = 10000

	putRaw(ctx, b, cli, clk.Now(), 0, n)

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()

	for b.Loop() {
		list, err := s.List(ctx)
		if err != nil || len(list) != n {
			b.Fatalf("List: %d entries, %v; want %d", len(list), err, n)
		}
	}
}
