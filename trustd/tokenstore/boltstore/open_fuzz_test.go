package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
)

// FuzzOpen covers the token store file as a node's state directory may
// hold it after a crash, a full disk or a bad restore: any content is
// refused as ErrCorrupt and left exactly as it was, or opens into a store
// that reads without a panic.
func FuzzOpen(f *testing.F) {
	good := storeFile(f, 3)
	page := os.Getpagesize()

	f.Add(good)
	f.Add(good[:2*page])
	f.Add(bytes.Repeat([]byte{0xff}, 4*page))
	f.Add([]byte("not a database"))

	dir := f.TempDir()

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "tokens.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}

		s, err := boltstore.Open(boltstore.Config{Path: path, LockTimeout: time.Second})
		if err != nil {
			if !errors.Is(err, boltstore.ErrCorrupt) {
				t.Fatalf("refusal %v is not ErrCorrupt", err)
			}

			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, data) {
				t.Fatalf("a refused file was changed (%v)", rerr)
			}

			return
		}
		defer s.Close()

		if _, err = s.List(context.Background()); err != nil {
			t.Fatalf("an opened store does not list: %v", err)
		}
	})
}
