// Package etcdsnap checks etcd snapshot files: those etcd streams are its
// bbolt backend followed by the SHA-256 of the backend. Both machined (before
// it restores one) and aegisctl (after it saves one) check them.
package etcdsnap

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// hashSize is the size of the SHA-256 that ends a snapshot.
const hashSize = sha256.Size

// minSize is the smallest possible snapshot: bbolt's two meta pages of the
// smallest page size bbolt writes, and the hash.
const minSize = 2*512 + hashSize

// openTimeout bounds the wait for bbolt's file lock; nothing else should
// hold a snapshot being checked.
const openTimeout = time.Second

// ErrInvalid is every way a file fails to be a snapshot.
var ErrInvalid = errors.New("etcdsnap: not a valid etcd snapshot")

// Info describes a valid snapshot.
type Info struct {
	// Size of the file in bytes.
	Size int64
	// Revision is the store's latest revision.
	Revision int64
	// Keys counts the stored key revisions.
	Keys int
}

// Check verifies the snapshot at path: its trailing hash over the rest, then
// the backend inside, and reports what the backend holds.
func Check(path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("etcdsnap: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only

	st, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("etcdsnap: %w", err)
	}

	if st.Size() < minSize {
		return Info{}, fmt.Errorf("%w: %d bytes is too short", ErrInvalid, st.Size())
	}

	h := sha256.New()
	if _, err = io.CopyN(h, f, st.Size()-hashSize); err != nil {
		return Info{}, fmt.Errorf("etcdsnap: %w", err)
	}

	trailer := make([]byte, hashSize)
	if _, err = io.ReadFull(f, trailer); err != nil {
		return Info{}, fmt.Errorf("etcdsnap: %w", err)
	}

	if !bytes.Equal(h.Sum(nil), trailer) {
		return Info{}, fmt.Errorf("%w: its SHA-256 does not match (truncated or altered)", ErrInvalid)
	}

	info, err := backend(path)
	info.Size = st.Size()

	return info, err
}

// backend reads the latest revision from the snapshot's "key" bucket.
func backend(path string) (Info, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: openTimeout})
	if err != nil {
		return Info{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	defer db.Close() //nolint:errcheck // read-only

	var info Info

	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%w: no key bucket", ErrInvalid)
		}

		info.Keys = b.Stats().KeyN

		if k, _ := b.Cursor().Last(); len(k) >= 8 {
			info.Revision = int64(binary.BigEndian.Uint64(k[:8]))
		}

		return nil
	})

	return info, err
}
