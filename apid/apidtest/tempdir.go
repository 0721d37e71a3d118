package apidtest

import (
	"os"
	"testing"
)

// ShortTempDir returns a new directory removed when the test ends, under
// /tmp rather than the test's own temporary directory, whose long path
// would not leave room for a Unix socket name (108 bytes at most).
func ShortTempDir(tb testing.TB) string {
	tb.Helper()

	dir, err := os.MkdirTemp("", "apid")
	if err != nil {
		tb.Fatalf("temporary directory: %v", err)
	}

	tb.Cleanup(func() { os.RemoveAll(dir) })

	return dir
}
