// Package etcdsnaptest makes etcd snapshots for tests of the code that
// checks, saves and uploads them.
package etcdsnaptest

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Snapshot returns a bbolt file shaped like etcd's backend (a "key"
// bucket keyed by revision) with keys revisions, followed by its SHA-256,
// as etcd streams a snapshot.
func Snapshot(t *testing.T, keys int) []byte {
	t.Helper()

	path := filepath.Join(t.TempDir(), "db")

	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}

	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}

		for i := 1; i <= keys; i++ {
			k := make([]byte, 17)
			binary.BigEndian.PutUint64(k, uint64(i))
			k[8] = '_'

			if err := b.Put(k, []byte("value")); err != nil {
				return err
			}
		}

		return nil
	})
	if err = errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	sum := sha256.Sum256(data)

	return append(data, sum[:]...)
}
