package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWriteCreatesWithMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key.pem")

	if err := Write(path, []byte("secret"), 0o600, Options{}); err != nil {
		t.Fatal(err)
	}

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}

	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}

	if dir.Mode().Perm() != 0o700 {
		t.Fatalf("created dir mode = %v, want 0700", dir.Mode().Perm())
	}
}

func TestWriteRefusesToOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")

	if err := Write(path, []byte("one"), 0o644, Options{}); err != nil {
		t.Fatal(err)
	}

	err := Write(path, []byte("two"), 0o644, Options{})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}

	assertContent(t, path, "one")

	if err := Write(path, []byte("two"), 0o644, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}

	assertContent(t, path, "two")
	assertNoTemps(t, filepath.Dir(path))
}

func TestConcurrentCreateHasOneWinner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)

	for range 16 {
		wg.Add(1)

		go func() {
			defer wg.Done()

			if Write(path, []byte("x"), 0o600, Options{}) == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}

	wg.Wait()

	if wins != 1 {
		t.Fatalf("%d writers succeeded, want exactly 1", wins)
	}

	assertNoTemps(t, filepath.Dir(path))
}

func assertContent(t *testing.T, path, want string) {
	t.Helper()

	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	if string(got) != want {
		t.Fatalf("content = %q, want %q", got, want)
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the target", len(entries))
	}
}
