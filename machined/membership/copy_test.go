package membership_test

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// TestListFromCopy: while FollowChanges keeps the copy, List answers from
// it, with every change committed before the call: an entry written just
// before, and after a write elsewhere in etcd that its watch never sees
// (the watch's progress says the copy is current). Once the follow ends,
// List reads every entry again.
func TestListFromCopy(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	kv := etcdtest.Count(cli)
	clk := clock.NewFake(time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC))
	ctx := context.Background()

	putRaw(ctx, t, cli, clk.Now(), 0, 3)

	s, err := membership.New(membership.Config{Client: cli, Clock: clk, Copy: membership.NewCopy()})
	if err != nil {
		t.Fatal(err)
	}

	stop := followed(t, s)

	kv.Ranges.Store(0)

	list := func(want int) {
		t.Helper()

		got, err := s.List(ctx)
		if err != nil || len(got) != want {
			t.Fatalf("List: %d entries, %v; want %d", len(got), err, want)
		}
	}

	// An entry committed just before the call is listed.
	putRaw(ctx, t, cli, clk.Now(), 3, 1)
	list(4)

	// A write the watch does not see moves etcd's revision past the copy's.
	if _, err := cli.Put(ctx, "/aegis/elsewhere", "x"); err != nil {
		t.Fatal(err)
	}

	list(4)

	if n := kv.Ranges.Load(); n != 0 {
		t.Fatalf("List read every entry %d times while the copy was kept; want none", n)
	}

	stop()
	putRaw(ctx, t, cli, clk.Now(), 4, 1)
	list(5)

	if kv.Ranges.Load() == 0 {
		t.Fatal("List answered from a copy no longer kept")
	}
}
