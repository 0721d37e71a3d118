package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The binaries are built once, by the first test that needs them, into a
// directory TestMain removes at the end; a run that selects no such test
// (-short, or benchmarks only) builds nothing.
var (
	binDir   string
	buildErr error
	building sync.Once

	imagesErr      error
	buildingImages sync.Once
)

// TestMain removes the built binaries after the tests.
func TestMain(m *testing.M) {
	flag.Parse()

	code := m.Run()

	if binDir != "" {
		os.RemoveAll(binDir)
	}

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

// needImages makes sure the binaries and the system image archives (in
// binDir/images, where machined looks by default) are built.
func needImages(t *testing.T) {
	t.Helper()
	needBinaries(t)

	buildingImages.Do(func() {
		if imagesErr = build(binDir, "aegis-image"); imagesErr != nil {
			return
		}

		out, err := exec.Command(filepath.Join(binDir, "aegis-image"), "--bin-dir", binDir, "--out", filepath.Join(binDir, "images")).CombinedOutput()
		if err != nil {
			imagesErr = fmt.Errorf("aegis-image: %w\n%s", err, out)
		}
	})

	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
}

// needBinaries skips a test under -short and otherwise makes sure the real
// binaries are built.
func needBinaries(t *testing.T) {
	t.Helper()

	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}

	building.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "aegis-e2e-bin-"); buildErr != nil {
			return
		}

		for _, name := range []string{"trustd", "apid", "machined", "aegisctl", "etcd"} {
			if buildErr = build(binDir, name); buildErr != nil {
				return
			}
		}
	})

	if buildErr != nil {
		t.Fatal(buildErr)
	}
}
