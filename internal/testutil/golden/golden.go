// Package golden compares test output with files under testdata/ and
// rewrites them when the test runs with -update. The flag lives here alone,
// so that every package's tests spell it the same way.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Update reports whether the test runs with -update.
func Update() bool { return *update }

// Compare fails the test unless got equals the file testdata/name; with
// -update it writes got there first.
func Compare(tb testing.TB, name string, got []byte) {
	tb.Helper()

	path := filepath.Join("testdata", name)
	if *update {
		Write(tb, path, got)
	}

	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}

	if !bytes.Equal(got, want) {
		tb.Fatalf("%s differs from the golden file (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// Write writes data to path, creating its directory.
func Write(tb testing.TB, path string, data []byte) {
	tb.Helper()

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}

	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}
