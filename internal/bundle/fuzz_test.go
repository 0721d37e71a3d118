package bundle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExtract: whatever the bytes, Extract either accepts a bundle whose
// every file is in place, or refuses it (ErrInvalid, or a version error)
// and leaves nothing behind; it never panics or writes outside its dir.
func FuzzExtract(f *testing.F) {
	good := goodEntries()
	f.Add(archive(&testing.T{}, false, marshal(&testing.T{}, manifestOf("v0.3.0", good)), good))
	f.Add(archive(&testing.T{}, true, marshal(&testing.T{}, manifestOf("v0.3.0", good)), good))
	f.Add([]byte("manifest.json"))

	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "slot")

		m, err := Extract(bytes.NewReader(data), dir, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("a refusal that is not ErrInvalid: %v", err)
			}

			if left, _ := os.ReadDir(root); len(left) != 0 {
				t.Fatalf("a refused bundle left %v", left)
			}

			return
		}

		for _, file := range m.Files {
			if fi, err := os.Stat(filepath.Join(dir, file.Path)); err != nil || fi.Size() != file.Size {
				t.Fatalf("accepted bundle without %s as its manifest says: %v", file.Path, err)
			}
		}

		if _, err := ReadManifest(bytes.NewReader(data)); err != nil {
			t.Fatalf("Extract accepted what ReadManifest refuses: %v", err)
		}
	})
}
