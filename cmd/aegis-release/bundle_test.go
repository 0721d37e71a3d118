package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/internal/bundle"
)

// TestBundle: a release writes a bundle that a node's reader accepts, with
// every binary and image of bin/ in it.
func TestBundle(t *testing.T) {
	in := testInputs(fakeBin(t))

	b, err := build(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	if filepath.Base(b.bundle) != "aegis-"+in.version+"-linux-amd64.bundle" {
		t.Fatalf("bundle %s", b.bundle)
	}

	f, err := os.Open(b.bundle)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	dir := filepath.Join(t.TempDir(), "slot")

	m, err := bundle.Extract(f, dir, bundle.Options{Running: "v1.1.0"})
	if err != nil {
		t.Fatal(err)
	}

	if m.Version != in.version {
		t.Fatalf("bundle version %s, want %s", m.Version, in.version)
	}

	want, err := os.ReadFile(filepath.Join(in.binDir, "images", "etcd.tar"))
	if err != nil {
		t.Fatal(err)
	}

	if got, err := os.ReadFile(filepath.Join(dir, "images", "etcd.tar")); err != nil || string(got) != string(want) {
		t.Fatalf("images/etcd.tar: %q, %v", got, err)
	}
}
