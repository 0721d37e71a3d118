package boltstore

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// ErrCorrupt is wrapped by Open's refusal of a file that is not a whole,
// consistent token store: truncated, damaged, or holding a record that does
// not decode. Such a file is left exactly as it was found, for the
// operator to restore or move away; the store never repairs, shrinks or
// re-creates it.
var ErrCorrupt = errors.New("boltstore: token store is corrupt")

// maxCheckErrors bounds the problems one check collects: the first few say
// what broke, a thousand more say nothing new.
const maxCheckErrors = 8

// checkExisting refuses an existing file that is empty, or whose first
// pages bbolt would trip over (see preflight). An empty file would be
// initialised by bbolt as a new database, silently turning a truncated
// store into an empty one. A file that does not exist yet is fine.
func checkExisting(path string) error {
	st, err := os.Stat(path)

	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("boltstore: %w", err)
	case st.Size() == 0:
		return fmt.Errorf("%w: %s is empty (truncated?)", ErrCorrupt, path)
	}

	return preflight(path)
}

// openGuarded opens the file with bbolt, turning the panics and memory
// faults bbolt meets in a damaged file (a freelist page pointing anywhere,
// pages past the end of a truncated file) into ErrCorrupt. bbolt loses its
// handle on the file when it panics while opening; the file is opened here
// so that it can be closed, which releases bbolt's lock on it.
func openGuarded(path string, opts *bolt.Options) (*bolt.DB, error) {
	var (
		db   *bolt.DB
		file *os.File
	)

	opts.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm) //nolint:gosec // the store's own path

		file = f

		return f, err
	}

	err := guarded(path, func() error {
		var err error

		db, err = bolt.Open(path, 0o600, opts)

		switch {
		case err == nil:
			return nil
		case errors.Is(err, bolt.ErrTimeout), errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
			return fmt.Errorf("boltstore: opening %s: %w", path, err)
		default:
			// Every other error of Open is about the file's content.
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
		}
	})
	if err != nil && db == nil && file != nil {
		file.Close() //nolint:errcheck // releasing what a failed Open left open
	}

	return db, err
}

// verify checks, before anything is written, that the file holds every
// page its meta page claims, that bbolt's consistency check finds nothing,
// and that every record decodes.
func verify(db *bolt.DB, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}

	return guarded(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			// Checked first: bbolt maps pages the meta claims whether the
			// file holds them or not, and reading one past the end faults.
			if tx.Size() > st.Size() {
				return fmt.Errorf("%w: %s: %d bytes, its pages need %d (truncated)", ErrCorrupt, path, st.Size(), tx.Size())
			}

			if err := consistent(tx); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
			}

			b := tx.Bucket(bucketName)
			if b == nil {
				return nil
			}

			return b.ForEach(func(k, v []byte) error {
				if _, derr := tokenstore.UnmarshalRecord(v); derr != nil {
					return fmt.Errorf("%w: %s: record %q: %w", ErrCorrupt, path, k, derr)
				}

				return nil
			})
		})
	})
}

// consistent runs bbolt's consistency check and joins the first problems
// it reports.
func consistent(tx *bolt.Tx) error {
	var problems []error

	for err := range tx.Check() {
		if len(problems) < maxCheckErrors {
			problems = append(problems, err)
		}
	}

	return errors.Join(problems...)
}

// guarded runs fn, which reads the file through bbolt, and turns a panic or
// a memory fault on the mapped file into ErrCorrupt: bbolt trusts the
// file's structure, and a damaged one makes it index anywhere.
func guarded(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()

	return fn()
}
