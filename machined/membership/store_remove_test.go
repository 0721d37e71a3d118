package membership_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// TestStoreRemove runs Remove on a real etcd: a live worker's entry, a
// connected one's and a control plane's are refused, naming them; an aged-out worker's entry is
// deleted, matched by hostname or address; nothing matching is no error.
func TestStoreRemove(t *testing.T) {
	e, _ := etcdtest.Start(t)
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	ctx := context.Background()

	s, err := membership.New(membership.Config{Client: etcdtest.Client(t, e), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, entry("cp-1", "10.0.0.1"), membership.RoleControlPlane); err != nil {
		t.Fatal(err)
	}

	for _, w := range []string{"10.0.0.5", "10.0.0.6"} {
		if err := s.Put(ctx, entry("worker-"+w[len(w)-1:], w), membership.RoleWorker); err != nil {
			t.Fatal(err)
		}
	}

	conn, closeConn := context.WithCancel(ctx)
	defer closeConn()

	if err := s.Hold(ctx, entry("worker-7", "10.0.0.7"), membership.RoleWorker, membership.HoldTerms{Closing: conn}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		node string
		err  error
		text string
	}{
		{"worker-5", membership.ErrAlive, "worker-5 (10.0.0.5) still sends heartbeats (its entry was written 0s ago; it ages out 3s after the last one); stop or reset it first"},
		{"worker-7", membership.ErrAlive, "worker-7 (10.0.0.7) is connected to a control plane, which holds its entry for that connection; stop or reset it first"},
		{"10.0.0.1", membership.ErrControlPlane, "cp-1 (10.0.0.1) is a control plane; it leaves the cluster through etcd's member removal"},
	} {
		if _, err := s.Remove(ctx, tt.node); !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.text) {
			t.Fatalf("Remove(%s) = %v, want %v with %q", tt.node, err, tt.err, tt.text)
		}
	}

	clk.Advance(membership.StaleAfter(time.Second) + time.Second) // the etcd leases (real time) still hold the entries

	for _, node := range []string{"worker-5", "10.0.0.6"} {
		gone, err := s.Remove(ctx, node)
		if err != nil || len(gone) != 1 {
			t.Fatalf("Remove(%s) = %v, %v, want its entry", node, gone, err)
		}
	}

	if _, err := s.Remove(ctx, "10.0.0.1"); !errors.Is(err, membership.ErrControlPlane) {
		t.Fatalf("an aged-out control plane's entry: %v, want ErrControlPlane", err)
	}

	if gone, err := s.Remove(ctx, "worker-5"); err != nil || len(gone) != 0 {
		t.Fatalf("Remove again = %v, %v, want nothing", gone, err)
	}

	// Read as of the puts, when every entry was live.
	then, err := membership.New(membership.Config{Client: etcdtest.Client(t, e), Clock: clock.NewFake(start)})
	if err != nil {
		t.Fatal(err)
	}

	// worker-7 is still connected, so still listed.
	if list, err := then.List(ctx); err != nil || len(list) != 2 || list[0].GetHostname() != "cp-1" || list[1].GetHostname() != "worker-7" {
		t.Fatalf("List after the removals = %v, %v, want cp-1 and the connected worker-7", list, err)
	}
}

// TestStoreRemoveEntryGoneMeanwhile: an aged-out entry that its lease
// deletes between Remove's read and its transaction is no error: Remove
// reads again and finds nothing left to delete.
func TestStoreRemoveEntryGoneMeanwhile(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	cli := etcdtest.Client(t, e)

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, entry("worker-5", "10.0.0.5"), membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	clk.Advance(membership.StaleAfter(time.Second) + time.Second)

	deleted := 0

	membership.SetBeforeRemove(s, func() {
		if deleted == 0 {
			// What the entry's lease does when it ends.
			if _, err := cli.Delete(ctx, "/aegis/members/", clientv3.WithPrefix()); err != nil {
				t.Error(err)
			}
		}

		deleted++
	})

	if gone, err := s.Remove(ctx, "worker-5"); err != nil || len(gone) != 0 {
		t.Fatalf("Remove with the entry gone meanwhile = %v, %v, want nothing and no error", gone, err)
	}

	if deleted != 1 {
		t.Fatalf("%d transactions tried, want the first (refused), then a read that finds nothing", deleted)
	}
}
