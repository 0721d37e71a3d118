// Package testutil holds what tests across Aegis share: the fixed time a fake
// clock starts at, a Rand that makes jitter and keys deterministic, and a
// temporary directory short enough for Unix sockets. Golden files are in the
// golden subpackage, so that only the tests that use them get its -update
// flag.
package testutil

import (
	"os"
	"testing"
	"time"
)

// Epoch is the fixed "now" of tests that use a fake clock: far enough ahead
// that no real certificate or token in a test fixture is still valid then.
var Epoch = time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)

// ZeroRand is a Rand that yields only zero bytes: jitter drawn from it is
// none, so waits and renewal times are exact.
type ZeroRand struct{}

// Read fills p with zeros.
func (ZeroRand) Read(p []byte) (int, error) {
	clear(p)

	return len(p), nil
}

// ShortTempDir returns a new directory removed when the test ends, under
// /tmp rather than the test's own temporary directory, whose long path
// would not leave room for a Unix socket name (108 bytes at most).
func ShortTempDir(tb testing.TB) string {
	tb.Helper()

	dir, err := os.MkdirTemp("", "ae")
	if err != nil {
		tb.Fatalf("temporary directory: %v", err)
	}

	tb.Cleanup(func() { os.RemoveAll(dir) })

	return dir
}
