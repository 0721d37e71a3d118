package namestore_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// TestControlPlaneNamesFromTheFollowedList: until the member list is
// followed, the control planes' names come from a read of every entry;
// from the first whole list on, from what was followed, with no such
// read, and a control plane that joins or leaves is known at the next
// call, before the names are due again.
func TestControlPlaneNamesFromTheFollowedList(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(time.Now())
	ctx := context.Background()

	var reads atomic.Int64

	s, err := namestore.New(namestore.Config{
		Client: etcdtest.Client(t, e), Clock: clk,
		Members: func(context.Context) ([]namestore.Entry, error) {
			reads.Add(1)

			return []namestore.Entry{{Name: "cp-read", ControlPlane: true}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// names returns the control planes' names other than etcd's members'
	// (the one-member etcd of the test is named "m0"), sorted, and the
	// reads of every entry they cost.
	names := func() ([]string, int64) {
		t.Helper()

		before := reads.Load()

		got, err := s.ControlPlaneNames(ctx)
		if err != nil {
			t.Fatal(err)
		}

		got = slices.DeleteFunc(got, func(n string) bool { return n == "m0" })
		slices.Sort(got)

		return got, reads.Load() - before
	}

	want := func(what string, got []string, n int64, wantNames []string, wantReads int64) {
		t.Helper()

		if !slices.Equal(got, wantNames) || n != wantReads {
			t.Fatalf("%s: names %q after %d reads of every entry, want %q after %d", what, got, n, wantNames, wantReads)
		}
	}

	a1, a2, a3 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")

	// A change before the whole list means nothing yet.
	s.KnowMembers(false, []namestore.Entry{{Name: "cp-early", Addresses: []netip.Addr{a3}, ControlPlane: true}}, nil)

	got, n := names()
	want("before the list is followed", got, n, []string{"cp-read"}, 1)

	// A whole list without a control plane is one its sender has not read
	// yet: the list is still read.
	s.KnowMembers(true, []namestore.Entry{{Name: "worker-1", Addresses: []netip.Addr{a2}}}, nil)

	got, n = names()
	want("a list not read yet", got, n, []string{"cp-read"}, 1)

	s.KnowMembers(true, []namestore.Entry{
		{Name: "cp-1", Addresses: []netip.Addr{a1}, ControlPlane: true},
		{Name: "worker-1", Addresses: []netip.Addr{a2}},
	}, nil)

	got, n = names()
	want("the whole list followed", got, n, []string{"cp-1"}, 0)

	// A control plane joins: known at once, not controlPlanesFresh later.
	s.KnowMembers(false, []namestore.Entry{{Name: "cp-2", Addresses: []netip.Addr{a3}, ControlPlane: true}}, nil)

	got, n = names()
	want("a control plane joined", got, n, []string{"cp-1", "cp-2"}, 0)

	// One leaves, and the worker's entry is written again: no change.
	s.KnowMembers(false, []namestore.Entry{{Name: "worker-1", Addresses: []netip.Addr{a2}}}, []netip.Addr{a1})

	got, n = names()
	want("a control plane left", got, n, []string{"cp-2"}, 0)

	// Due again: still no read of every entry.
	clk.Advance(time.Minute)

	got, n = names()
	want("due again", got, n, []string{"cp-2"}, 0)
}

// TestCheckFromTheFollowedList: once the member list is followed, a name
// no other entry holds is checked without a read of every entry; one that
// another entry holds is read, and refused.
func TestCheckFromTheFollowedList(t *testing.T) {
	e, _ := etcdtest.Start(t)
	ctx := context.Background()

	var reads atomic.Int64

	s, err := namestore.New(namestore.Config{
		Client: etcdtest.Client(t, e),
		Members: func(context.Context) ([]namestore.Entry, error) {
			reads.Add(1)

			return []namestore.Entry{{Name: "held", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.9")}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	caller := netip.MustParseAddr("10.0.0.7")

	check := func(what, name string, source netip.Addr, wantErr error, wantReads int64) {
		t.Helper()

		before := reads.Load()
		err := s.Check(ctx, name, source)

		if n := reads.Load() - before; !errors.Is(err, wantErr) || n != wantReads {
			t.Fatalf("%s: Check(%s, %s) = %v after %d reads of every entry; want %v after %d", what, name, source, err, n, wantErr, wantReads)
		}
	}

	check("before the list is followed", "free", caller, nil, 1)

	s.KnowMembers(true, []namestore.Entry{
		{Name: "cp-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, ControlPlane: true},
		{Name: "held", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.9")}},
		{Name: "Mine", Addresses: []netip.Addr{caller}},
	}, nil)

	check("a free name", "free", caller, nil, 0)
	check("the caller's own entry's name", "mine", caller, nil, 0)
	check("a name another entry holds", "held", caller, trustd.ErrNameHeld, 1)
}
