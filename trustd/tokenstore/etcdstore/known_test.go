package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

// TestStaleKnownRecord runs two stores on one etcd, as two control planes'
// trustd: each keeps the last record it saw, which the other's changes
// make stale. A change from a stale record must never count on it: the
// transaction's revision compare sends it back to the record as it is.
func TestStaleKnownRecord(t *testing.T) {
	e, _ := etcdtest.Start(t)
	ctx := context.Background()
	open := func() *etcdstore.Store {
		s, err := etcdstore.New(etcdstore.Config{Client: etcdtest.Client(t, e)})
		if err != nil {
			t.Fatal(err)
		}

		return s
	}
	a, b := open(), open()

	t.Run("uses counted on both", func(t *testing.T) {
		if err := a.Create(ctx, storetest.NewRecord(t, "count1", 0, 0)); err != nil {
			t.Fatal(err)
		}

		for i, s := range []*etcdstore.Store{a, b, a, b, a} {
			r, err := s.Use(ctx, "count1", testutil.Epoch)
			if err != nil || r.Uses != uint32(i+1) {
				t.Fatalf("use %d: %d uses, %v", i+1, r.Uses, err)
			}
		}
	})

	t.Run("single use taken by the other", func(t *testing.T) {
		if err := a.Create(ctx, storetest.NewRecord(t, "single", 0, 1)); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Get(ctx, "single"); err != nil { // a knows it unused
			t.Fatal(err)
		}

		if _, err := b.Use(ctx, "single", testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Use(ctx, "single", testutil.Epoch); !errors.Is(err, tokenstore.ErrUsedUp) {
			t.Fatalf("a second use through the store that saw it unused: %v, want ErrUsedUp", err)
		}
	})

	t.Run("revoked by the other", func(t *testing.T) {
		if err := a.Create(ctx, storetest.NewRecord(t, "revokd", 0, 0)); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Use(ctx, "revokd", testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if _, err := b.Revoke(ctx, "revokd", testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Use(ctx, "revokd", testutil.Epoch.Add(time.Second)); !errors.Is(err, tokenstore.ErrRevoked) {
			t.Fatalf("use after a revocation elsewhere: %v, want ErrRevoked", err)
		}
	})

	t.Run("pruned and made again", func(t *testing.T) {
		if err := a.Create(ctx, storetest.NewRecord(t, "again1", -48*time.Hour, 1)); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Get(ctx, "again1"); err != nil { // a knows it expired
			t.Fatal(err)
		}

		if _, err := b.Prune(ctx, testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if _, err := a.Use(ctx, "again1", testutil.Epoch); !errors.Is(err, tokenstore.ErrNotFound) {
			t.Fatalf("use of a pruned token: %v, want ErrNotFound", err)
		}

		if err := b.Create(ctx, storetest.NewRecord(t, "again1", 0, 2)); err != nil {
			t.Fatal(err)
		}

		r, err := a.Use(ctx, "again1", testutil.Epoch)
		if err != nil || r.Uses != 1 || r.MaxUses != 2 {
			t.Fatalf("use of the token made again: %+v, %v", r, err)
		}
	})
}
