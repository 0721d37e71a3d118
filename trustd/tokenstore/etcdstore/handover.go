package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Handover is a control plane's token store across the cluster's
// bootstrap: the node's own store (bbolt) while the cluster has no etcd,
// the shared etcd store once it has one, and never the node's own again.
//
// The first operation after etcd is formed copies the local records into
// etcd (a record whose id etcd already holds is left alone, so a copy cut
// short is simply done again) and then writes the marker file; from then on
// every operation goes to etcd and fails with tokenstore.ErrUnavailable
// when etcd cannot answer, rather than split the tokens between stores.
type Handover struct {
	cfg HandoverConfig

	mu     sync.RWMutex // held for writing while records are copied
	onEtcd bool
}

// HandoverConfig says which stores to hand over between.
type HandoverConfig struct {
	// Local is the node's store before etcd. Required.
	Local tokenstore.Store
	// Shared is the etcd store. Required.
	Shared tokenstore.Store
	// Formed reports whether the cluster's etcd has been formed (the local
	// member holds data). Required.
	Formed func() bool
	// Marker is the file that records that the tokens moved to etcd; it
	// outlives the member's data, so a member reset never brings the local
	// store back. Required.
	Marker string
	// Logger notes the handover. Nil discards.
	Logger *slog.Logger
}

var _ tokenstore.Recaller = (*Handover)(nil)

// NewHandover returns the store of cfg; it does not contact etcd.
func NewHandover(cfg HandoverConfig) (*Handover, error) {
	if cfg.Local == nil || cfg.Shared == nil || cfg.Formed == nil || cfg.Marker == "" {
		return nil, errors.New("etcdstore: handover needs a local store, a shared store, a formed check and a marker")
	}

	cfg.Logger = defaults.Logger(cfg.Logger)

	h := &Handover{cfg: cfg}
	if _, err := os.Stat(cfg.Marker); err == nil {
		h.onEtcd = true
	}

	return h, nil
}

// OnEtcd reports whether the tokens have moved to etcd.
func (h *Handover) OnEtcd() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()

	return h.onEtcd
}

// with runs fn on the store in use. Operations on the local store hold the
// read lock, so no use counted locally is lost while the records are copied.
func (h *Handover) with(ctx context.Context, fn func(tokenstore.Store) error) error {
	h.mu.RLock()
	if h.onEtcd {
		h.mu.RUnlock()

		return fn(h.cfg.Shared)
	}

	if !h.cfg.Formed() {
		defer h.mu.RUnlock()

		return fn(h.cfg.Local)
	}

	h.mu.RUnlock()

	if err := h.moveToEtcd(ctx); err != nil {
		return err
	}

	return fn(h.cfg.Shared)
}

// moveToEtcd copies the local records into etcd once and writes the marker.
func (h *Handover) moveToEtcd(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()

	if h.onEtcd {
		return nil
	}

	records, err := h.cfg.Local.List(ctx)
	if err != nil {
		return fmt.Errorf("etcdstore: reading the local tokens to move them to etcd: %w", err)
	}

	moved := 0

	for _, r := range records {
		switch err := h.cfg.Shared.Create(ctx, r); {
		case err == nil:
			moved++
		case errors.Is(err, tokenstore.ErrExists):
		default:
			return fmt.Errorf("etcdstore: moving token %s to etcd: %w", r.ID, err)
		}
	}

	if err := atomicfile.Write(h.cfg.Marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600,
		atomicfile.Options{Overwrite: true}); err != nil {
		return fmt.Errorf("etcdstore: %w", err)
	}

	h.onEtcd = true
	h.cfg.Logger.Info("token store moved to etcd", slog.Int(logkey.Moved, moved), slog.Int(logkey.LocalRecords, len(records)))

	return nil
}

// Create implements tokenstore.Store.
func (h *Handover) Create(ctx context.Context, r tokenstore.Record) error {
	return h.with(ctx, func(s tokenstore.Store) error { return s.Create(ctx, r) })
}

// Get implements tokenstore.Store.
func (h *Handover) Get(ctx context.Context, id string) (r tokenstore.Record, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error { r, err = s.Get(ctx, id); return err })

	return r, err
}

// List implements tokenstore.Store.
func (h *Handover) List(ctx context.Context) (rs []tokenstore.Record, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error { rs, err = s.List(ctx); return err })

	return rs, err
}

// Revoke implements tokenstore.Store.
func (h *Handover) Revoke(ctx context.Context, id string, at time.Time) (r tokenstore.Record, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error { r, err = s.Revoke(ctx, id, at); return err })

	return r, err
}

// Use implements tokenstore.Store.
func (h *Handover) Use(ctx context.Context, id string, now time.Time) (r tokenstore.Record, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error { r, err = s.Use(ctx, id, now); return err })

	return r, err
}

// Prune implements tokenstore.Store.
func (h *Handover) Prune(ctx context.Context, endedBefore time.Time) (n int, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error { n, err = s.Prune(ctx, endedBefore); return err })

	return n, err
}

// Recall implements tokenstore.Recaller: the shared store's kept record once
// the tokens are on etcd; before, none, so that the local store, read
// without a round through the cluster, is read.
func (h *Handover) Recall(id string) (tokenstore.Record, bool) {
	if r, ok := h.cfg.Shared.(tokenstore.Recaller); ok && h.OnEtcd() {
		return r.Recall(id)
	}

	return tokenstore.Record{}, false
}

// UseIf implements tokenstore.Recaller. A store in use that has no UseIf of
// its own (bbolt) counts the use with Use: its caller judged the record it
// has just read there, since Recall keeps none before the handover.
func (h *Handover) UseIf(ctx context.Context, id string, now time.Time, check func(tokenstore.Record) error) (r tokenstore.Record, err error) {
	err = h.with(ctx, func(s tokenstore.Store) error {
		if rs, ok := s.(tokenstore.Recaller); ok {
			r, err = rs.UseIf(ctx, id, now, check)
		} else {
			r, err = s.Use(ctx, id, now)
		}

		return err
	})

	return r, err
}
