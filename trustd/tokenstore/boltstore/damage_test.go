package boltstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
)

// storeFile writes a store holding n tokens and returns its bytes.
func storeFile(t testing.TB, n int) []byte {
	t.Helper()

	path := filepath.Join(t.TempDir(), "tokens.db")
	s := open(t, boltstore.Config{Path: path})
	now := time.Now()

	for range n {
		tok, err := token.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}

		r := tokenstore.Record{ID: tok.ID(), Created: now, Expires: now.Add(time.Hour), Description: "a token of the damage tests"}
		if err = r.SetSecret(rand.Reader, tok.Secret()); err != nil {
			t.Fatal(err)
		}

		if err = s.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	return data
}

// flipAll returns data with n bytes inverted at shift past each offset.
func flipAll(data []byte, offsets []int, shift, n int) []byte {
	out := bytes.Clone(data)
	for _, off := range offsets {
		for i := off + shift; i < off+shift+n && i < len(out); i++ {
			out[i] = data[i] ^ 0xff
		}
	}

	return out
}

// TestDamagedFilesAreRefused: a truncated or damaged store is refused with
// ErrCorrupt, without a panic, and the file is left byte for byte as it was.
func TestDamagedFilesAreRefused(t *testing.T) {
	good := storeFile(t, 100)
	page := os.Getpagesize()

	// Records are JSON objects with a version. bbolt copies pages on write
	// and leaves the old copies in free pages, so a record found in the
	// file may be a stale one: every copy found is damaged, which damages
	// the live one whichever it is.
	var recs, pages []int

	for off := 0; ; {
		i := bytes.Index(good[off:], []byte(`{"v":1`))
		if i < 0 {
			break
		}

		recs = append(recs, off+i)
		pages = append(pages, off+i-(off+i)%page)
		off += i + 1
	}

	if len(recs) == 0 {
		t.Fatal("no record found in the file")
	}

	recPage := pages[0]

	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"a few bytes", good[:100]},
		{"meta pages only", good[:2*page]},
		{"half", good[:len(good)/2]},
		{"a record page cut in two", good[:recPage+page/2]},
		{"record page header", flipAll(good, pages, 8, 2)},
		{"record page content", flipAll(good, pages, 16, 64)},
		{"record value", flipAll(good, recs, 0, 8)},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}

			s, err := boltstore.Open(boltstore.Config{Path: path, LockTimeout: time.Second})
			if err == nil {
				s.Close()
				t.Fatal("damaged store opened")
			}

			if !errors.Is(err, boltstore.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}

			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}

			if !bytes.Equal(after, tt.data) {
				t.Fatal("the refused file was changed")
			}

			// The refusal released the file: a sound store at the same
			// path opens at once.
			if err = os.WriteFile(path, good, 0o600); err != nil {
				t.Fatal(err)
			}

			if s, err = boltstore.Open(boltstore.Config{Path: path, LockTimeout: time.Second}); err != nil {
				t.Fatalf("the refused file stayed locked: %v", err)
			}

			s.Close()
		})
	}
}

// TestOpenWritesNothing: opening and closing a sound store changes no byte
// of it, so a store is only ever written by the operations asked of it.
func TestOpenWritesNothing(t *testing.T) {
	good := storeFile(t, 10)
	path := filepath.Join(t.TempDir(), "tokens.db")

	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}

	s := open(t, boltstore.Config{Path: path})

	recs, err := s.List(context.Background())
	if err != nil || len(recs) != 10 {
		t.Fatalf("List: %d records, %v", len(recs), err)
	}

	if err = s.Close(); err != nil {
		t.Fatal(err)
	}

	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	if !bytes.Equal(after, good) {
		t.Fatal("open and close changed the file")
	}
}
