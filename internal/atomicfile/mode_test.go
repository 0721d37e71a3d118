package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModeIgnoresUmask checks that the mode asked for is the mode written,
// both for a new file and for one replaced over an existing file of another mode.
func TestModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	path := filepath.Join(t.TempDir(), "ca.crt")

	if err := Write(path, []byte("one"), 0o644, Options{}); err != nil {
		t.Fatal(err)
	}

	assertMode(t, path, 0o644)

	if err := Write(path, []byte("two"), 0o600, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}

	assertMode(t, path, 0o600)
	assertContent(t, path, "two")
	assertNoTemps(t, filepath.Dir(path))
}

// TestFailedWriteLeavesNothing checks that a write that fails when its
// temporary file is moved into place removes that file.
func TestFailedWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")

	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A directory in the way makes the rename fail after the temp file is written.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(path, "inside"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := Write(path, []byte("new"), 0o600, Options{Overwrite: true}); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}

	assertNoTemps(t, dir)
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != want {
		t.Fatalf("mode of %s = %v, want %v", path, st.Mode().Perm(), want)
	}
}
