package etcdstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

// downStore is a shared store whose etcd never answers.
type downStore struct{ tokenstore.Store }

func (downStore) Create(context.Context, tokenstore.Record) error {
	return tokenstore.ErrUnavailable
}

func (downStore) Get(context.Context, string) (tokenstore.Record, error) {
	return tokenstore.Record{}, tokenstore.ErrUnavailable
}

func TestHandover(t *testing.T) {
	ctx := context.Background()
	local, shared := tokenstore.NewMemory(0), tokenstore.NewMemory(0)
	marker := filepath.Join(t.TempDir(), "tokens-on-etcd")

	var formed atomic.Bool

	newHandover := func(shared tokenstore.Store) *etcdstore.Handover {
		h, err := etcdstore.NewHandover(etcdstore.HandoverConfig{Local: local, Shared: shared, Formed: formed.Load, Marker: marker})
		if err != nil {
			t.Fatal(err)
		}

		return h
	}

	h := newHandover(shared)

	// Before etcd: the local store, and a use counted there.
	if err := h.Create(ctx, storetest.NewRecord(t, "aaaaaa", 0, 2)); err != nil {
		t.Fatal(err)
	}

	if _, err := h.Use(ctx, "aaaaaa", testutil.Epoch); err != nil {
		t.Fatal(err)
	}

	if _, err := shared.Get(ctx, "aaaaaa"); !errors.Is(err, tokenstore.ErrNotFound) {
		t.Fatalf("shared store before etcd: %v, want ErrNotFound", err)
	}

	// etcd formed but unavailable: refused, never the local store.
	formed.Store(true)

	if _, err := newHandover(downStore{shared}).Get(ctx, "aaaaaa"); !errors.Is(err, tokenstore.ErrUnavailable) {
		t.Fatalf("formed, etcd down: %v, want ErrUnavailable", err)
	}

	// etcd formed: the record moves with its use count.
	r, err := h.Use(ctx, "aaaaaa", testutil.Epoch)
	if err != nil || r.Uses != 2 || !h.OnEtcd() {
		t.Fatalf("first use on etcd: uses %d, on etcd %v, %v", r.Uses, h.OnEtcd(), err)
	}

	if r, err = shared.Get(ctx, "aaaaaa"); err != nil || r.Uses != 2 {
		t.Fatalf("shared record: uses %d, %v", r.Uses, err)
	}

	// Never back: with the member's data gone and etcd down, a new
	// handover (trustd restarted) still refuses instead of using bbolt.
	formed.Store(false)

	if _, err = newHandover(downStore{shared}).Get(ctx, "aaaaaa"); !errors.Is(err, tokenstore.ErrUnavailable) {
		t.Fatalf("after the move, etcd down: %v, want ErrUnavailable", err)
	}

	// A second move (another trustd start) skips what is there.
	if _, err = newHandover(shared).Revoke(ctx, "aaaaaa", testutil.Epoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}
