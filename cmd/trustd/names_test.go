package main

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// TestHeartbeatProvesName: a worker's heartbeat binds the name its
// certificate carries, and is refused a name a control plane or another
// node holds; before the cluster is formed an unreachable record is none.
func TestHeartbeatProvesName(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	ctx := context.Background()
	until := time.Now().Add(time.Hour)

	store, err := namestore.New(namestore.Config{Client: cli, Members: func(context.Context) ([]namestore.Entry, error) {
		return []namestore.Entry{{Name: "cp-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, ControlPlane: true}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}

	formed := true
	f := formedNames{store: store, formed: func() bool { return formed }}

	if err := f.proven(ctx, "worker-1", []string{"10.0.0.5"}, until); err != nil {
		t.Fatalf("own name: %v", err)
	}

	if err := f.Check(ctx, "worker-1", netip.MustParseAddr("10.0.0.6")); !errors.Is(err, trustd.ErrNameHeld) {
		t.Fatalf("the name after the heartbeat: %v, want bound to the worker", err)
	}

	for _, tt := range []struct{ name, addr string }{{"cp-1", "10.0.0.5"}, {"worker-1", "10.0.0.6"}} {
		if err := f.proven(ctx, tt.name, []string{tt.addr}, until); !errors.Is(err, membership.ErrNotOwner) {
			t.Errorf("%s from %s: %v, want ErrNotOwner", tt.name, tt.addr, err)
		}
	}

	// The worker leaves: its name is free for the node that replaces it,
	// at another address; a leaving node that does not hold a name frees
	// nothing.
	if err := f.release(ctx, []string{"worker-1"}, []string{"10.0.0.9"}); err != nil {
		t.Fatal(err)
	}

	if err := f.Check(ctx, "worker-1", netip.MustParseAddr("10.0.0.6")); !errors.Is(err, trustd.ErrNameHeld) {
		t.Fatalf("released by another node: %v, want still bound to the worker", err)
	}

	if err := f.release(ctx, []string{"worker-1"}, []string{"10.0.0.5"}); err != nil {
		t.Fatal(err)
	}

	if err := f.proven(ctx, "worker-1", []string{"10.0.0.6"}, until); err != nil {
		t.Fatalf("the replacement at a new address after the worker left: %v", err)
	}

	stop()

	// etcd is gone: each call waits out its context, kept short here.
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()

	formed = false
	if err := f.Check(ctx, "worker-2", netip.MustParseAddr("10.0.0.7")); err != nil {
		t.Fatalf("before the formation, without etcd: %v, want no record", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	formed = true
	if err := f.Check(ctx, "worker-2", netip.MustParseAddr("10.0.0.7")); err == nil {
		t.Fatal("once formed, without etcd: no error, want a failure")
	}
}

// TestUnformedClusterAnswersAtOnce: before the local etcd member is part of
// a formed cluster, neither the record of names nor the member list is
// asked (they would wait out etcd's timeout on every join and heartbeat):
// a name is free, a heartbeat is Unavailable at once. The stores are nil
// here, so a call to either would panic.
func TestUnformedClusterAnswersAtOnce(t *testing.T) {
	ctx := context.Background()
	unformed := func() bool { return false }
	f := formedNames{formed: unformed}

	if err := f.Check(ctx, "worker-1", netip.MustParseAddr("10.0.0.5")); err != nil {
		t.Fatalf("Check: %v", err)
	}

	if err := f.Bind(ctx, trustd.Binding{Name: "worker-1"}); err != nil {
		t.Fatalf("Bind: %v", err)
	}

	if names, err := f.ControlPlaneNames(ctx); err != nil || names != nil {
		t.Fatalf("ControlPlaneNames: %v, %v", names, err)
	}

	if err := f.proven(ctx, "worker-1", []string{"10.0.0.5"}, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("proven: %v", err)
	}

	if err := f.release(ctx, []string{"worker-1"}, []string{"10.0.0.5"}); err != nil {
		t.Fatalf("release: %v", err)
	}

	w := formedWriter{formed: unformed}
	if err := w.Put(ctx, &membership.Member{}, membership.RoleWorker); !errors.Is(err, membership.ErrUnavailable) {
		t.Fatalf("Put: %v, want ErrUnavailable", err)
	}

	if err := w.Delete(ctx, "10.0.0.5", membership.RoleWorker); !errors.Is(err, membership.ErrUnavailable) {
		t.Fatalf("Delete: %v, want ErrUnavailable", err)
	}
}
