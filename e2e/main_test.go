package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds the binaries built for the tests; empty with -short.
var binDir string

// TestMain builds the binaries the tests run as real processes, once.
func TestMain(m *testing.M) {
	flag.Parse()

	if testing.Short() {
		os.Exit(m.Run())
	}

	dir, err := os.MkdirTemp("", "aegis-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}

	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/aegis-os/aegis/cmd/apid")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr

	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building binaries:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}

	binDir = dir
	code := m.Run()

	os.RemoveAll(dir)
	os.Exit(code)
}

// needBinaries skips slow tests under -short.
func needBinaries(t *testing.T) {
	t.Helper()

	if testing.Short() || binDir == "" {
		t.Skip("end-to-end test: skipped with -short")
	}
}
