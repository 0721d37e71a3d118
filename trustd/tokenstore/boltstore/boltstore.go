// Package boltstore is the node's default token store: a bbolt file in the
// node's state directory (mode 0600), so tokens and their use counts survive
// a restart of trustd. One process opens the file at a time; a second Open
// waits for the file lock up to Config.LockTimeout.
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// bucketName holds the records keyed by token id. The version in the name
// lets a later layout live beside this one during a migration.
var bucketName = []byte("tokens.v1")

// DefaultLockTimeout is how long Open waits for another process to release
// the file. A restarting trustd may overlap its predecessor by a moment.
const DefaultLockTimeout = 5 * time.Second

// Config says which file to open.
type Config struct {
	// Path of the database file. Required. Its directory must exist.
	Path string
	// MaxRecords bounds the records; zero means tokenstore.DefaultMaxRecords.
	MaxRecords int
	// LockTimeout bounds the wait for the file lock; zero means DefaultLockTimeout.
	LockTimeout time.Duration
}

// Store is a tokenstore.Store in a bbolt file. It is safe for concurrent
// use; bbolt runs one writing transaction at a time, which makes Use atomic.
type Store struct {
	db         *bolt.DB
	maxRecords int
}

var _ tokenstore.Store = (*Store)(nil)

// Open opens or creates the store at cfg.Path with mode 0600. An existing
// file with looser permissions is tightened to 0600. An existing file is
// checked whole before anything is written to it (see ErrCorrupt): a
// damaged store is refused and left as it is, never repaired or replaced.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("boltstore: no path")
	}

	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = tokenstore.DefaultMaxRecords
	}

	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = DefaultLockTimeout
	}

	if err := checkExisting(cfg.Path); err != nil {
		return nil, err
	}

	db, err := openGuarded(cfg.Path, &bolt.Options{Timeout: cfg.LockTimeout})
	if err != nil {
		return nil, err
	}

	if err = prepare(db, cfg.Path); err != nil {
		db.Close()

		return nil, err
	}

	return &Store{db: db, maxRecords: cfg.MaxRecords}, nil
}

// prepare checks the file, tightens its mode and creates the bucket if it
// is missing. bbolt writes a transaction even when it changes nothing, so
// the bucket is created only when it is not there.
func prepare(db *bolt.DB, path string) error {
	if err := verify(db, path); err != nil {
		return err
	}

	// bbolt applies the mode only when it creates the file; a file made by
	// hand or restored from a backup may be readable by others.
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}

	var exists bool

	if err := db.View(func(tx *bolt.Tx) error { exists = tx.Bucket(bucketName) != nil; return nil }); err != nil || exists {
		return err
	}

	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(bucketName)

		return err
	})
	if err != nil {
		return fmt.Errorf("boltstore: preparing %s: %w", path, err)
	}

	return nil
}

// Close releases the file.
func (s *Store) Close() error { return s.db.Close() }

// Create implements tokenstore.Store.
func (s *Store) Create(ctx context.Context, r tokenstore.Record) error {
	if err := r.Validate(); err != nil {
		return err
	}

	data, err := tokenstore.MarshalRecord(r)
	if err != nil {
		return err
	}

	return s.update(ctx, func(b *bolt.Bucket) error {
		if b.Get([]byte(r.ID)) != nil {
			return tokenstore.ErrExists
		}

		if n := b.Stats().KeyN; n >= s.maxRecords {
			return fmt.Errorf("%w (%d)", tokenstore.ErrFull, s.maxRecords)
		}

		return b.Put([]byte(r.ID), data)
	})
}

// Get implements tokenstore.Store.
func (s *Store) Get(ctx context.Context, id string) (tokenstore.Record, error) {
	var r tokenstore.Record

	err := s.view(ctx, func(b *bolt.Bucket) error {
		data := b.Get([]byte(id))
		if data == nil {
			return tokenstore.ErrNotFound
		}

		var err error
		r, err = tokenstore.UnmarshalRecord(data)

		return err
	})

	return r, err
}

// List implements tokenstore.Store.
func (s *Store) List(ctx context.Context) ([]tokenstore.Record, error) {
	var out []tokenstore.Record

	err := s.view(ctx, func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			r, err := tokenstore.UnmarshalRecord(v)
			if err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}

			out = append(out, r)

			return nil
		})
	})
	if err != nil {
		return nil, err
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

// Prune implements tokenstore.Store.
func (s *Store) Prune(ctx context.Context, endedBefore time.Time) (int, error) {
	n := 0

	err := s.update(ctx, func(b *bolt.Bucket) error {
		var ended [][]byte

		err := b.ForEach(func(k, v []byte) error {
			// A record that no longer decodes is kept: deleting what
			// cannot be read would hide the corruption.
			if r, err := tokenstore.UnmarshalRecord(v); err == nil && r.Ended().Before(endedBefore) {
				ended = append(ended, append([]byte(nil), k...))
			}

			return nil
		})
		if err != nil {
			return err
		}

		for _, k := range ended {
			if err := b.Delete(k); err != nil {
				return err
			}
		}

		n = len(ended)

		return nil
	})

	return n, err
}

// change reads a record, applies fn and writes it back in one transaction;
// if fn fails nothing is written.
func (s *Store) change(ctx context.Context, id string, fn func(*tokenstore.Record) error) (tokenstore.Record, error) {
	var r tokenstore.Record

	err := s.update(ctx, func(b *bolt.Bucket) error {
		data := b.Get([]byte(id))
		if data == nil {
			return tokenstore.ErrNotFound
		}

		var err error
		if r, err = tokenstore.UnmarshalRecord(data); err != nil {
			return err
		}

		if err = fn(&r); err != nil {
			return err
		}

		if data, err = tokenstore.MarshalRecord(r); err != nil {
			return err
		}

		return b.Put([]byte(id), data)
	})
	if err != nil {
		return tokenstore.Record{}, err
	}

	return r, nil
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}

	return s.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketName)) })
}

func (s *Store) view(ctx context.Context, fn func(*bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}

	return s.db.View(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketName)) })
}
