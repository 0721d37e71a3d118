package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

// TestGenConfigToken: with --token, the worker joins with that token and
// the control plane keeps the static one; without the cluster's secrets,
// or with a malformed token, nothing is written.
func TestGenConfigToken(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "gen", "secrets")

	stored := "w4k2zq.0123456789abcdef"
	mustRun(t, dir, "gen", "config", "demo", "10.5.0.2", "--with-secrets", "secrets.yaml", "-o", "w", "--token", stored)

	bundle, err := certs.LoadBundle(filepath.Join(dir, "secrets.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	worker, err := certs.LoadMachineConfig(filepath.Join(dir, "w", "worker.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	cp, err := certs.LoadMachineConfig(filepath.Join(dir, "w", "controlplane.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	if worker.TrustdToken().Reveal() != stored || cp.Machine.Token != bundle.TrustdInfo.Token {
		t.Fatalf("worker token %q, control plane token %q (static %q)", worker.Machine.Token, cp.Machine.Token, bundle.TrustdInfo.Token)
	}

	refusals := map[string][]string{
		"--with-secrets": {"gen", "config", "demo", "10.5.0.2", "-o", "x", "--token", stored},
		"--token":        {"gen", "config", "demo", "10.5.0.2", "--with-secrets", "secrets.yaml", "-o", "y", "--token", "nope"},
	}

	for want, args := range refusals {
		_, err := run(t, dir, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", args, err, want)
		}

		if fileExists(filepath.Join(dir, args[len(args)-3], "worker.yaml")) {
			t.Errorf("%q wrote worker.yaml", args)
		}
	}
}
