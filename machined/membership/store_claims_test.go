package membership_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

const names = "/aegis/member-names/"

// claimStore is a Store on a fresh etcd, with its client and fake clock.
func claimStore(t *testing.T) (*membership.Store, *clientv3.Client, *clock.Fake) {
	t.Helper()

	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	return s, cli, clk
}

// holder is the address the name key of hostname points at, "" if none.
func holder(t *testing.T, cli *clientv3.Client, hostname string) string {
	t.Helper()

	resp, err := cli.Get(context.Background(), names+hostname)
	if err != nil {
		t.Fatal(err)
	}

	if len(resp.Kvs) == 0 {
		return ""
	}

	return string(resp.Kvs[0].Value)
}

// legacy writes m as a version without the index wrote it: the entry
// alone, live at now.
func legacy(t *testing.T, cli *clientv3.Client, m *membership.Member, now time.Time) {
	t.Helper()

	m = proto.CloneOf(m)
	m.Role, m.LastSeen = membership.RoleWorker, timestamppb.New(now)

	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := cli.Put(context.Background(), "/aegis/members/"+m.GetAddresses()[0], string(data)); err != nil {
		t.Fatal(err)
	}
}

func TestClaimRace(t *testing.T) {
	ctx := context.Background()

	t.Run("the second of two claims read before either wrote conflicts, then is refused", func(t *testing.T) {
		a, cli, _ := claimStore(t)

		b, err := membership.New(membership.Config{Client: cli, Clock: clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}

		membership.SetBeforePut(a, func() {
			membership.SetBeforePut(a, nil)

			if err := b.Put(ctx, entry("node-x", "10.0.0.21"), membership.RoleWorker); err != nil {
				t.Errorf("b's claim: %v", err)
			}
		})

		if err := a.Put(ctx, entry("node-x", "10.0.0.20"), membership.RoleWorker); !errors.Is(err, membership.ErrConflict) {
			t.Fatalf("a's claim raced by b's: %v, want ErrConflict", err)
		}

		if err := a.Put(ctx, entry("node-x", "10.0.0.20"), membership.RoleWorker); !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("a's next claim: %v, want ErrNotOwner", err)
		}

		if got := holder(t, cli, "node-x"); got != "10.0.0.21" {
			t.Fatalf("name key → %q, want b's 10.0.0.21", got)
		}
	})

	t.Run("of many concurrent claims exactly one wins", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  []string
			errs []error
		)

		for i := range 8 {
			wg.Go(func() {
				addr := fmt.Sprintf("10.0.1.%d", i+1)
				err := s.Put(ctx, entry("node-y", addr), membership.RoleWorker)

				mu.Lock()
				defer mu.Unlock()

				if err == nil {
					won = append(won, addr)
				} else {
					errs = append(errs, err)
				}
			})
		}

		wg.Wait()

		for _, err := range errs {
			if !errors.Is(err, membership.ErrConflict) && !errors.Is(err, membership.ErrNotOwner) {
				t.Fatalf("a losing claim: %v, want ErrConflict or ErrNotOwner", err)
			}
		}

		if len(won) != 1 || holder(t, cli, "node-y") != won[0] {
			t.Fatalf("won by %v, name key → %q: want exactly one winner, indexed", won, holder(t, cli, "node-y"))
		}

		list, err := s.List(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %v %v, want the winner alone", list, err)
		}
	})
}

func TestClaimFreed(t *testing.T) {
	ctx := context.Background()

	t.Run("the holder's lease expires: entry and name key go together", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		if err := s.Put(ctx, entry("node-l", "10.0.0.30"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		resp, err := cli.Get(ctx, "/aegis/members/10.0.0.30")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("entry: %v %v", resp, err)
		}

		idx, err := cli.Get(ctx, names+"node-l")
		if err != nil || len(idx.Kvs) != 1 || idx.Kvs[0].Lease != resp.Kvs[0].Lease {
			t.Fatalf("name key %v %v: want it under the entry's lease", idx, err)
		}

		// What the lease's expiry does, at once.
		if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			t.Fatal(err)
		}

		if got := holder(t, cli, "node-l"); got != "" {
			t.Fatalf("name key → %q after the lease ended", got)
		}

		if err := s.Put(ctx, entry("node-l", "10.0.0.31"), membership.RoleWorker); err != nil {
			t.Fatalf("the freed name: %v", err)
		}
	})

	t.Run("the holder aged out while its lease lives: the name is taken over", func(t *testing.T) {
		s, cli, clk := claimStore(t)

		if err := s.Put(ctx, entry("node-m", "10.0.0.32"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		clk.Advance(membership.StaleAfter(time.Second) + time.Millisecond)

		if err := s.Put(ctx, entry("node-m", "10.0.0.33"), membership.RoleWorker); err != nil {
			t.Fatalf("the name of an aged-out entry: %v", err)
		}

		// The old holder comes back: the name is the new one's now.
		if err := s.Put(ctx, entry("node-m", "10.0.0.32"), membership.RoleWorker); !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("the old holder's claim: %v, want ErrNotOwner", err)
		}

		if got := holder(t, cli, "node-m"); got != "10.0.0.33" {
			t.Fatalf("name key → %q, want 10.0.0.33", got)
		}
	})

	t.Run("a deleted entry takes its name key along", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		if err := s.Put(ctx, entry("node-d", "10.0.0.34"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if err := s.Delete(ctx, "10.0.0.34", membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if got := holder(t, cli, "node-d"); got != "" {
			t.Fatalf("name key → %q after the entry left", got)
		}
	})
}

func TestClaimStaleIndex(t *testing.T) {
	ctx := context.Background()

	t.Run("a name key whose entry is gone is taken over", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		if _, err := cli.Put(ctx, names+"node-s", "10.0.0.40"); err != nil {
			t.Fatal(err)
		}

		if err := s.Put(ctx, entry("node-s", "10.0.0.41"), membership.RoleWorker); err != nil {
			t.Fatalf("a name whose key points at nothing: %v", err)
		}

		if got := holder(t, cli, "node-s"); got != "10.0.0.41" {
			t.Fatalf("name key → %q, want 10.0.0.41", got)
		}
	})

	t.Run("a name key whose entry holds another name now is taken over", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		if err := s.Put(ctx, entry("node-other", "10.0.0.42"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if _, err := cli.Put(ctx, names+"node-r", "10.0.0.42"); err != nil {
			t.Fatal(err)
		}

		if err := s.Put(ctx, entry("node-r", "10.0.0.43"), membership.RoleWorker); err != nil {
			t.Fatalf("a name whose key points at another name's entry: %v", err)
		}
	})

	t.Run("a renamed entry gives its old name up", func(t *testing.T) {
		s, cli, _ := claimStore(t)

		if err := s.Put(ctx, entry("node-old", "10.0.0.44"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if err := s.Put(ctx, entry("node-new", "10.0.0.44"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		if got := holder(t, cli, "node-old"); got != "" {
			t.Fatalf("old name key → %q after the rename", got)
		}

		if got := holder(t, cli, "node-new"); got != "10.0.0.44" {
			t.Fatalf("new name key → %q", got)
		}
	})
}

func TestClaimWithoutIndex(t *testing.T) {
	ctx := context.Background()

	t.Run("an entry of the previous version keeps its name, and gets its key", func(t *testing.T) {
		s, cli, clk := claimStore(t)

		legacy(t, cli, entry("node-u", "10.0.0.50"), clk.Now())

		if err := s.Put(ctx, entry("node-u", "10.0.0.51"), membership.RoleWorker); !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("a name held by an entry without its key: %v, want ErrNotOwner", err)
		}

		if err := s.Put(ctx, entry("node-u", "10.0.0.50"), membership.RoleWorker); err != nil {
			t.Fatalf("the holder's own heartbeat: %v", err)
		}

		if got := holder(t, cli, "node-u"); got != "10.0.0.50" {
			t.Fatalf("name key → %q, want it filled with 10.0.0.50", got)
		}
	})

	t.Run("one read of every entry serves the checks of NamesFresh", func(t *testing.T) {
		s, cli, clk := claimStore(t)

		// A first heartbeat reads every entry; an entry written without
		// its key just after is not seen until the read is NamesFresh old.
		if err := s.Put(ctx, entry("node-a", "10.0.0.70"), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}

		legacy(t, cli, entry("node-b", "10.0.0.71"), clk.Now())

		if err := s.Put(ctx, entry("node-b", "10.0.0.72"), membership.RoleWorker); err != nil {
			t.Fatalf("within NamesFresh of the last read: %v, want the read reused", err)
		}

		clk.Advance(membership.NamesFresh)
		legacy(t, cli, entry("node-c", "10.0.0.73"), clk.Now())

		if err := s.Put(ctx, entry("node-c", "10.0.0.74"), membership.RoleWorker); !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("NamesFresh after the last read: %v, want ErrNotOwner from a new read", err)
		}
	})

	t.Run("the read of every entry goes past one page", func(t *testing.T) {
		s, cli, clk := claimStore(t)

		// 600 entries without keys, the holder of node-p last in key order.
		for i := range 600 {
			legacy(t, cli, entry(fmt.Sprintf("node-%03d", i), fmt.Sprintf("10.0.%d.%d", 2+i/200, 1+i%200)), clk.Now())
		}

		legacy(t, cli, entry("node-p", "10.9.9.9"), clk.Now())

		if err := s.Put(ctx, entry("node-p", "10.0.0.60"), membership.RoleWorker); !errors.Is(err, membership.ErrNotOwner) {
			t.Fatalf("a name held past the first page: %v, want ErrNotOwner", err)
		}
	})
}
