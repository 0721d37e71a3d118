package membership_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// eventTimeout bounds the wait for a change etcd has committed to reach
// the follower: it arrives in milliseconds; this only ends a broken test.
const eventTimeout = 10 * time.Second

// following is a Follow under test: each list it publishes, in order.
type following struct {
	lists chan []*membership.Member
}

// follow runs s.Follow until the test ends.
func follow(t *testing.T, s *membership.Store) *following {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	f := &following{lists: make(chan []*membership.Member, 64)}

	var wg sync.WaitGroup

	wg.Go(func() { s.Follow(ctx, func(list []*membership.Member) { f.lists <- list }) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	return f
}

// next is the next list published, as hostnames.
func (f *following) next(t *testing.T) []string {
	t.Helper()

	select {
	case list := <-f.lists:
		var names []string
		for _, m := range list {
			names = append(names, m.GetHostname())
		}

		return names
	case <-time.After(eventTimeout):
		t.Fatal("no list published")

		return nil
	}
}

func (f *following) expect(t *testing.T, want ...string) {
	t.Helper()

	if got := f.next(t); !slices.Equal(got, want) {
		t.Fatalf("published %q, want %q", got, want)
	}
}

// longEntry is an entry whose lease outlives the test: the leases run on
// etcd's clock, not on the fake one.
func longEntry(host, addr string) *membership.Member {
	m := entry(host, addr)
	m.Interval = durationpb.New(time.Minute)

	return m
}

func TestFollow(t *testing.T) {
	e, _ := etcdtest.Start(t)
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	ctx := context.Background()

	reader, err := membership.New(membership.Config{Client: etcdtest.Client(t, e), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	// Another node's writes, through its own client.
	cli := etcdtest.Client(t, e)

	writer, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if err := writer.Put(ctx, longEntry("cp-1", "10.0.0.1"), membership.RoleControlPlane); err != nil {
		t.Fatal(err)
	}

	f := follow(t, reader)
	f.expect(t, "cp-1")

	t.Run("a put reaches publish with no interval passed", func(t *testing.T) {
		if err := writer.Put(ctx, longEntry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1")

		if !clk.Now().Equal(start) {
			t.Fatal("the fake clock moved")
		}
	})

	t.Run("a last-seen refresh alone publishes nothing", func(t *testing.T) {
		// Old enough for the heartbeat to write last_seen again.
		clk.Advance(membership.LastSeenRefresh(time.Minute))

		if err := writer.Put(ctx, longEntry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		// The next list published is the one of the next visible change:
		// the refresh before it published none.
		if err := writer.Put(ctx, longEntry("worker-2", "10.0.0.6"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1", "worker-2")
	})

	t.Run("a changed version publishes", func(t *testing.T) {
		m := longEntry("worker-2", "10.0.0.6")
		m.Version = "v1.0.1"

		if err := writer.Put(ctx, m, membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1", "worker-2")
	})

	t.Run("a damaged entry is skipped", func(t *testing.T) {
		if _, err := cli.Put(ctx, "/aegis/members/10.0.0.9", "not a member"); err != nil {
			t.Fatal(err)
		}

		// Nothing a reader sees changed: the next list is the next change's.
		if err := writer.Put(ctx, longEntry("worker-9", "10.0.0.9"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1", "worker-2", "worker-9")

		if _, err := cli.Put(ctx, "/aegis/members/10.0.0.9", "damaged again"); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1", "worker-2")
	})

	t.Run("a delete reaches publish", func(t *testing.T) {
		if err := writer.Delete(ctx, "10.0.0.6", membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		f.expect(t, "cp-1", "worker-1")
	})

	t.Run("an entry aged out by its stamp leaves", func(t *testing.T) {
		// cp-1 was last seen a refresh before worker-1: it ages out first.
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		clk.Set(start.Add(membership.StaleAfter(time.Minute) + time.Millisecond))
		f.expect(t, "worker-1")
	})
}

func TestFollowCompacted(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, longEntry("cp-1", "10.0.0.1"), membership.RoleControlPlane); err != nil {
		t.Fatal(err)
	}

	// Between the first read and its watch, a worker joins and etcd
	// compacts its history past the read: the watch cannot start there.
	var once sync.Once

	membership.SetAfterLoad(s, func() {
		once.Do(func() {
			if err := s.Put(ctx, longEntry("worker-1", "10.0.0.5"), membership.RoleWorker); err != nil {
				t.Error(err)
			}

			// Past the worker's put too: the watch cannot replay it.
			resp, err := cli.Put(ctx, "/aegis/other", "")
			if err == nil {
				_, err = cli.Compact(ctx, resp.Header.Revision)
			}

			if err != nil {
				t.Error(err)
			}
		})
	})

	f := follow(t, s)
	f.expect(t, "cp-1")
	// Read again at once, not after a backoff: the fake clock never moves.
	f.expect(t, "cp-1", "worker-1")

	// And watched again from there.
	if err := s.Delete(ctx, "10.0.0.5", membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	f.expect(t, "cp-1")
}
