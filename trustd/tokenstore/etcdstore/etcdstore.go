// Package etcdstore is the token store shared by a cluster's control
// planes: the records live in etcd under one prefix, one key per token id,
// in the encoding of tokenstore.MarshalRecord (the bbolt store's). Every
// read is linearizable and every change is a transaction that compares the
// record's revision, so a use counted on one control plane is seen by all,
// and of many concurrent uses of a single-use token exactly one succeeds.
// The store keeps the last record it saw per id (Recall), which a caller
// may judge a token on without a read, provided it counts the use with
// UseIf: the transaction's revision compare is then the freshness check.
// Changes that arrive while a transaction is under way share the next one
// (batch.go), each record still compared on its own revision.
//
// The store fails closed: when etcd cannot answer within the timeout (no
// quorum, unreachable) every operation fails with tokenstore.ErrUnavailable.
package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Config says which etcd to use.
type Config struct {
	// Client talks to the cluster. Required; the caller closes it.
	Client *clientv3.Client
	// Prefix of the record keys; empty means DefaultPrefix.
	Prefix string
	// MaxRecords bounds the records; zero means tokenstore.DefaultMaxRecords.
	MaxRecords int
	// Timeout bounds one operation; zero means DefaultTimeout.
	Timeout time.Duration
}

// Store is a tokenstore.Store in etcd. It is safe for concurrent use, also
// by several processes on several nodes at once.
type Store struct {
	cli        *clientv3.Client
	prefix     string
	maxRecords int
	timeout    time.Duration

	// known is the last record read or written per id, with its revision:
	// a change starts from it and needs no read of its own when nobody
	// changed the record since (trustd reads it to authenticate just
	// before it counts a use). It is never trusted: the transaction
	// compares the revision, and on a mismatch returns the record as it is.
	mu    sync.Mutex
	known map[string]knownRecord
	// noCache turns known off, for the benchmark of the store without it.
	noCache bool

	// bmu guards the changes queued for the next batch (batch.go) and
	// whether a caller is running batches.
	bmu     sync.Mutex
	queue   []*request
	running bool
}

type knownRecord struct {
	rec tokenstore.Record
	rev int64
}

var _ tokenstore.Recaller = (*Store)(nil)

// New returns the store of cfg; it does not contact etcd.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcdstore: no etcd client")
	}

	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}

	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = tokenstore.DefaultMaxRecords
	}

	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}

	return &Store{cli: cfg.Client, prefix: cfg.Prefix, maxRecords: cfg.MaxRecords, timeout: cfg.Timeout, known: map[string]knownRecord{}}, nil
}

// remember keeps r at rev as the last known state of its record; a bound
// keeps ids that come and go from growing the map without end.
func (s *Store) remember(r tokenstore.Record, rev int64) {
	if s.noCache {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if _, ok := s.known[r.ID]; !ok && len(s.known) >= s.maxRecords {
		clear(s.known)
	}

	s.known[r.ID] = knownRecord{rec: r, rev: rev}
}

func (s *Store) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	delete(s.known, id)
}

func (s *Store) recall(id string) (knownRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	k, ok := s.known[id]

	return k, ok
}

func (s *Store) key(id string) string { return s.prefix + id }

// Create implements tokenstore.Store. The count of records and the absence
// of the id are checked in the transaction that writes: it succeeds only if
// no key under the prefix changed since the count was taken.
func (s *Store) Create(ctx context.Context, r tokenstore.Record) error {
	if err := r.Validate(); err != nil {
		return err
	}

	data, err := tokenstore.MarshalRecord(r)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	for range maxAttempts {
		done, err := s.tryCreate(ctx, r.ID, string(data))
		if done || err != nil {
			return err
		}
	}

	return fmt.Errorf("%w: too many concurrent changes", tokenstore.ErrUnavailable)
}

func (s *Store) tryCreate(ctx context.Context, id, data string) (bool, error) {
	count, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, unavailable(err)
	}

	if count.Count >= int64(s.maxRecords) {
		return false, fmt.Errorf("%w (%d)", tokenstore.ErrFull, s.maxRecords)
	}

	key := s.key(id)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.ModRevision(s.prefix).WithPrefix(), "<", count.Header.Revision+1),
	).Then(clientv3.OpPut(key, data)).Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return false, unavailable(err)
	}

	if resp.Succeeded {
		return true, nil
	}

	if resp.Responses[0].GetResponseRange().GetCount() > 0 {
		return false, tokenstore.ErrExists
	}

	return false, nil // another record changed in between; count again
}

// Get implements tokenstore.Store.
func (s *Store) Get(ctx context.Context, id string) (tokenstore.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	r, _, err := s.get(ctx, id)

	return r, err
}

// get reads the record and the revision it was last changed at.
func (s *Store) get(ctx context.Context, id string) (tokenstore.Record, int64, error) {
	resp, err := s.cli.Get(ctx, s.key(id))
	if err != nil {
		return tokenstore.Record{}, 0, unavailable(err)
	}

	return s.decode(id, resp.Kvs)
}

// decode turns the key-values of a read of id's key into its record and
// revision, and remembers them.
func (s *Store) decode(id string, kvs []*mvccpb.KeyValue) (tokenstore.Record, int64, error) {
	if len(kvs) == 0 {
		s.forget(id)

		return tokenstore.Record{}, 0, tokenstore.ErrNotFound
	}

	r, err := tokenstore.UnmarshalRecord(kvs[0].Value)
	if err != nil {
		s.forget(id)

		return tokenstore.Record{}, 0, fmt.Errorf("etcdstore: record %s: %w", id, err)
	}

	s.remember(r, kvs[0].ModRevision)

	return r, kvs[0].ModRevision, nil
}

// List implements tokenstore.Store.
func (s *Store) List(ctx context.Context) ([]tokenstore.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(err)
	}

	out := make([]tokenstore.Record, 0, len(resp.Kvs))

	for _, kv := range resp.Kvs {
		r, err := tokenstore.UnmarshalRecord(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: record %s: %w", kv.Key, err)
		}

		out = append(out, r)
	}

	tokenstore.SortRecords(out)

	return out, nil
}

// Revoke implements tokenstore.Store.
func (s *Store) Revoke(ctx context.Context, id string, at time.Time) (tokenstore.Record, error) {
	return s.change(ctx, id, func(r *tokenstore.Record) error { return r.RevokeAt(at) })
}

// Use implements tokenstore.Store.
func (s *Store) Use(ctx context.Context, id string, now time.Time) (tokenstore.Record, error) {
	return s.change(ctx, id, func(r *tokenstore.Record) error { return r.UseAt(now) })
}

// UseIf implements tokenstore.Recaller: check runs on every record the
// transaction is tried on, the last one being the record as it was when the
// use was counted.
func (s *Store) UseIf(ctx context.Context, id string, now time.Time, check func(tokenstore.Record) error) (tokenstore.Record, error) {
	return s.change(ctx, id, func(r *tokenstore.Record) error {
		if err := check(*r); err != nil {
			return err
		}

		return r.UseAt(now)
	})
}

// Recall implements tokenstore.Recaller.
func (s *Store) Recall(id string) (tokenstore.Record, bool) {
	k, ok := s.recall(id)

	return k.rec.Clone(), ok
}

// Prune implements tokenstore.Store. Each deletion compares the revision it
// read, so a record revoked or used in between is judged again next time.
func (s *Store) Prune(ctx context.Context, endedBefore time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	n, err := etcdutil.Prune(ctx, s.cli, s.prefix, func(value []byte) bool {
		r, err := tokenstore.UnmarshalRecord(value)

		return err == nil && r.Ended().Before(endedBefore) // a corrupt record is left for the operator to see
	})
	if err != nil {
		return n, unavailable(err)
	}

	return n, nil
}

// unavailable wraps an error of the etcd client: whatever the cause (no
// leader, timeout, refused connection) the store cannot answer, and the
// caller must refuse.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", tokenstore.ErrUnavailable, err)
}
