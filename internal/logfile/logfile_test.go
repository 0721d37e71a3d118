package logfile_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/logfile"
)

func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "audit.log")

	l, err := logfile.Open(path, 100, 3)
	if err != nil {
		t.Fatal(err)
	}

	// 30 lines of 20 bytes: 5 per file, so 6 files written, 4 kept.
	for i := range 30 {
		if _, err := fmt.Fprintf(l, "line %03d ..........\n", i); err != nil {
			t.Fatal(err)
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	var all bytes.Buffer

	for _, p := range l.Paths() {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}

		if len(b) > 100 {
			t.Fatalf("%s holds %d bytes", p, len(b))
		}

		all.Write(b)
	}

	lines := strings.Split(strings.TrimSpace(all.String()), "\n")
	if len(lines) != 20 || lines[0] != "line 010 .........." || lines[19] != "line 029 .........." {
		t.Fatalf("kept lines %q", lines)
	}

	if _, err := os.Stat(path + ".4"); !os.IsNotExist(err) {
		t.Fatalf("a fifth file: %v", err)
	}

	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", st, err)
	}
}

func TestReopenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")

	for _, s := range []string{"one\n", "two\n"} {
		l, err := logfile.Open(path, 1<<10, 1)
		if err != nil {
			t.Fatal(err)
		}

		if _, err = l.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}

		l.Close()
	}

	if b, _ := os.ReadFile(path); string(b) != "one\ntwo\n" {
		t.Fatalf("%q", b)
	}
}

func TestOpenRefusesBadBounds(t *testing.T) {
	for _, tc := range []struct {
		size int64
		keep int
	}{{0, 1}, {-1, 1}, {10, -1}} {
		if _, err := logfile.Open(filepath.Join(t.TempDir(), "x.log"), tc.size, tc.keep); err == nil {
			t.Fatalf("size %d keep %d accepted", tc.size, tc.keep)
		}
	}
}

// TestFailedRotationKeepsWriting: when the older files cannot be renamed
// (here: a directory in the way), records are kept in the current file.
func TestFailedRotationKeepsWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")

	if err := os.MkdirAll(filepath.Join(path+".1", "x"), 0o700); err != nil {
		t.Fatal(err)
	}

	l, err := logfile.Open(path, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, s := range []string{"first line\n", "second line\n", "third line\n"} {
		_, _ = l.Write([]byte(s))
	}

	if b, _ := os.ReadFile(path); string(b) != "first line\nsecond line\nthird line\n" {
		t.Fatalf("%q", b)
	}
}

// TestPosition: a follower learns of every rotation, and of none that
// failed (the records then stay in the current file).
func TestPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "service.log")

	l, err := logfile.Open(path, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, s := range []string{"first\n", "second\n", "third\n"} {
		if _, err := l.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	if gen, size := l.Position(); gen != 2 || size != int64(len("third\n")) {
		t.Fatalf("position %d, %d after two rotations", gen, size)
	}

	// A directory in the way of path.1 makes the next rotation fail.
	if err := os.Remove(path + ".1"); err != nil {
		t.Fatal(err)
	}

	if err := os.MkdirAll(filepath.Join(path+".1", "x"), 0o700); err != nil {
		t.Fatal(err)
	}

	_, _ = l.Write([]byte("fourth\n"))

	if gen, size := l.Position(); gen != 2 || size != int64(len("third\nfourth\n")) {
		t.Fatalf("position %d, %d after a failed rotation", gen, size)
	}
}
