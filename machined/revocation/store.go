package revocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/logkey"
)

// StoreConfig says which etcd to use.
type StoreConfig struct {
	// Client talks to the cluster. Required; the caller closes it.
	Client *clientv3.Client
	// Prefix of the keys; empty means DefaultPrefix.
	Prefix string
	// LineagePrefix is where the links of renewals live; empty means
	// DefaultLineagePrefix.
	LineagePrefix string
	// Max bounds the entries; zero means MaxEntries.
	Max int
	// MaxLineage bounds the live certificates of one family of renewals;
	// zero means MaxLineage.
	MaxLineage int
	// Timeout bounds one operation; zero means DefaultTimeout.
	Timeout time.Duration
	// Clock decides which entries have expired. Nil means the system clock.
	Clock clock.Clock
	// Logger receives the follow's failures. Nil discards.
	Logger *slog.Logger
}

// Store is the cluster's revocation list in etcd, one key per serial, and
// the lineage of renewals (Record), so that a revocation covers every
// certificate renewed from the one revoked. Every read is linearizable;
// without quorum every operation fails with ErrUnavailable.
type Store struct{ cfg StoreConfig }

// NewStore returns the store of cfg; it does not contact etcd.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("revocation: no etcd client")
	}

	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}

	if cfg.LineagePrefix == "" {
		cfg.LineagePrefix = DefaultLineagePrefix
	}

	if cfg.Max <= 0 {
		cfg.Max = MaxEntries
	}

	if cfg.MaxLineage <= 0 {
		cfg.MaxLineage = MaxLineage
	}

	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)

	return &Store{cfg: cfg}, nil
}

func (s *Store) key(serial string) string { return s.cfg.Prefix + serial }

// room makes sure n more entries fit: the count is checked, and when full
// the expired entries are pruned and the count checked again. Two
// revocations racing at the bound may both pass: the bound is on size, and
// a few entries over it cost nothing.
func (s *Store) room(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}

	for pruned := false; ; pruned = true {
		resp, err := s.cfg.Client.Get(ctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return unavailable(err)
		}

		if resp.Count+int64(n) <= int64(s.cfg.Max) {
			return nil
		}

		if pruned {
			return fmt.Errorf("%w: %d certificates not yet expired are revoked, and this revocation adds %d (limit %d); rotate the CA instead",
				ErrFull, resp.Count, n, s.cfg.Max)
		}

		if _, err := s.prune(ctx); err != nil {
			return err
		}
	}
}

// List returns the entries of certificates not yet expired, sorted by serial.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	entries, _, err := s.read(ctx)

	return entries, err
}

// read returns the entries not yet expired and the revision they were read at.
func (s *Store) read(ctx context.Context) ([]Entry, int64, error) {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, unavailable(err)
	}

	now := s.cfg.Clock.Now()
	out := make([]Entry, 0, len(resp.Kvs))

	for _, kv := range resp.Kvs {
		e, err := unmarshalEntry(kv.Value)
		if err != nil {
			s.cfg.Logger.Warn("revocation entry in etcd ignored", slog.String(logkey.EtcdKey, string(kv.Key)), slog.String(logkey.Error, err.Error()))

			continue
		}

		if !e.Expired(now) {
			out = append(out, e)
		}
	}

	return out, resp.Header.Revision, nil
}

// Prune deletes the entries whose certificates have expired, and the links
// of renewals no revocation needs any more, and returns how many entries
// and links.
func (s *Store) Prune(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	n, err := s.prune(ctx)
	if err != nil {
		return n, err
	}

	links, err := s.pruneLineage(ctx)

	return n + links, err
}

// prune deletes expired entries, and those that do not parse: no entry
// is written that way, and one that cannot be read revokes nothing.
func (s *Store) prune(ctx context.Context) (int, error) {
	now := s.cfg.Clock.Now()

	n, err := etcdutil.Prune(ctx, s.cfg.Client, s.cfg.Prefix, func(value []byte) bool {
		e, err := unmarshalEntry(value)

		return err != nil || e.Expired(now)
	})
	if err != nil {
		return n, unavailable(err)
	}

	return n, nil
}

// Follow calls apply with the whole list and the etcd revision it was read
// at, at once and again after every change in etcd, until ctx ends. When etcd cannot be read it waits and
// tries again, and apply is not called: the node keeps the list it has.
//
// A failure is logged as a warning once, and at debug level while it
// lasts: a control plane waiting for its bootstrap fails every second.
func (s *Store) Follow(ctx context.Context, apply func([]Entry, int64)) {
	failing := false
	applied := func(entries []Entry, rev int64) {
		failing = false

		apply(entries, rev)
	}

	for ctx.Err() == nil {
		err := s.followOnce(ctx, applied)
		if ctx.Err() != nil {
			return
		}

		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}

		failing = true
		s.cfg.Logger.Log(ctx, level, "following the revocation list in etcd", slog.String(logkey.Error, fmt.Sprint(err)))

		if !clock.Sleep(ctx, s.cfg.Clock, followRetry) {
			return
		}
	}
}

func (s *Store) followOnce(ctx context.Context, apply func([]Entry, int64)) error {
	readCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	entries, rev, err := s.read(readCtx)

	cancel()

	if err != nil {
		return err
	}

	apply(entries, rev)

	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer stop()

	for resp := range s.cfg.Client.Watch(wctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}

		// A notice of the watch's progress (etcd sends one on request to
		// every watch of a stream) changes nothing.
		if resp.IsProgressNotify() {
			continue
		}

		// A change: read the whole list again, so apply always sees a
		// consistent one; changes are rare (an operator's revoke).
		readCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		entries, rev, err := s.read(readCtx)

		cancel()

		if err != nil {
			return err
		}

		apply(entries, rev)
	}

	return errors.New("revocation: etcd watch ended")
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }
