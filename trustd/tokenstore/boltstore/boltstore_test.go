package boltstore_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

func TestConformance(t *testing.T) {
	paths := map[tokenstore.Store]string{}

	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T, maxRecords int) tokenstore.Store {
			path := filepath.Join(t.TempDir(), "tokens.db")
			s := open(t, boltstore.Config{Path: path, MaxRecords: maxRecords})
			paths[s] = path

			return s
		},
		Reopen: func(t *testing.T, old tokenstore.Store) tokenstore.Store {
			if err := old.(*boltstore.Store).Close(); err != nil {
				t.Fatal(err)
			}

			return open(t, boltstore.Config{Path: paths[old]})
		},
	})
}

func TestFileMode(t *testing.T) {
	dir := t.TempDir()

	t.Run("new file", func(t *testing.T) {
		path := filepath.Join(dir, "new.db")
		open(t, boltstore.Config{Path: path})
		checkMode(t, path)
	})

	t.Run("loose existing file", func(t *testing.T) {
		path := filepath.Join(dir, "loose.db")
		if err := open(t, boltstore.Config{Path: path}).Close(); err != nil {
			t.Fatal(err)
		}

		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}

		open(t, boltstore.Config{Path: path})
		checkMode(t, path)
	})
}

func TestSecondOpenWaitsForLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.db")
	open(t, boltstore.Config{Path: path})

	// A short lock timeout: the first store never releases the file in this
	// test, so the second Open must give up rather than share it.
	if s, err := boltstore.Open(boltstore.Config{Path: path, LockTimeout: 100 * time.Millisecond}); err == nil {
		s.Close()
		t.Fatal("second Open of a locked store succeeded")
	}
}

func TestOpenRefusesMissingDirectory(t *testing.T) {
	if _, err := boltstore.Open(boltstore.Config{Path: filepath.Join(t.TempDir(), "missing", "tokens.db")}); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func open(t testing.TB, cfg boltstore.Config) *boltstore.Store {
	t.Helper()

	s, err := boltstore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { s.Close() })

	return s
}

func checkMode(t *testing.T, path string) {
	t.Helper()

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Fatalf("mode = %o, want 600", mode)
	}
}
