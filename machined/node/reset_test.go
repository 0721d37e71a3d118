package node

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWipeExcept: everything in the state directory goes but the config
// and the folders that lead to it; a link out of the directory is removed,
// not followed.
func TestWipeExcept(t *testing.T) {
	root := t.TempDir()
	state, outside := filepath.Join(root, "state"), filepath.Join(root, "outside")

	for _, f := range []string{"pki/server.key", "etcd/member/wal/0.wal", "logs/apid.log", "revocations.json", "conf/d/config.yaml", "conf/other", "conf/d/other"} {
		mustWrite(t, filepath.Join(state, f))
	}

	mustWrite(t, filepath.Join(outside, "precious"))

	if err := os.Symlink(outside, filepath.Join(state, "link")); err != nil {
		t.Fatal(err)
	}

	keep := filepath.Join(state, "conf/d/config.yaml")
	if err := wipeExcept(state, keep); err != nil {
		t.Fatal(err)
	}

	var left []string

	_ = filepath.WalkDir(state, func(path string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(state, path)
			left = append(left, rel)
		}

		return nil
	})

	if !slices.Equal(left, []string{"conf/d/config.yaml"}) {
		t.Fatalf("left after the wipe: %v", left)
	}

	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Fatalf("a file outside the state directory: %v", err)
	}
}

func mustWrite(t *testing.T, path string) {
	t.Helper()

	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
