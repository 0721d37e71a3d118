package unixsock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenModesAndStaleSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "svc.sock")

	for range 2 { // the second Listen finds the first one's socket file
		lis, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}

		for p, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, path: os.ModeSocket | 0o600} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}

			if got := st.Mode() & (os.ModeType | os.ModePerm); got != want {
				t.Fatalf("%s: mode %v, want %v", p, got, want)
			}
		}

		// Leave the socket file behind, as a process that died would.
		lis.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
		lis.Close()
	}
}

func TestListenRefusesLongPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), strings.Repeat("x", MaxPathLength)+".sock")

	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "shorter state directory") {
		t.Fatalf("err = %v", err)
	}
}
