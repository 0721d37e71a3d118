package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds the binaries TestMain builds; empty under -short.
var binDir string

// TestMain builds the real binaries once for every test of the package.
// Under -short nothing is built: every test skips itself.
func TestMain(m *testing.M) {
	flag.Parse()

	if testing.Short() {
		os.Exit(m.Run())
	}

	dir, err := os.MkdirTemp("", "aegis-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}

	if err = build(dir, "trustd"); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}

	binDir = dir
	code := m.Run()

	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles ./cmd/NAME of this module into dir.
func build(dir, name string) error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")

	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", name, err, out)
	}

	return nil
}

// needBinaries skips a test under -short, where TestMain built nothing.
func needBinaries(t *testing.T) {
	t.Helper()

	if testing.Short() || binDir == "" {
		t.Skip("end-to-end test: skipped with -short")
	}
}
