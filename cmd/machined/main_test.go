package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/inherit"
)

// TestBadConfigStartsNothing: a config with several errors is refused with
// every one of them listed, and no state directory is created.
func TestBadConfigStartsNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	state := filepath.Join(dir, "state")

	doc := "version: v1alpha1\nmachine:\n    type: controlplane\n    token: nope\n    listenAddress: 300.1.1.1\n    time: {}\ncluster:\n    name: Bad_Name\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	err := run(context.Background(), []string{"--config", cfg, "--state", state, "--bin-dir", dir}, io.Discard, &bytes.Buffer{}, &inherit.Set{})

	var verr *certs.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v, want a validation error", err)
	}

	for _, path := range []string{"machine.listenAddress", "machine.token", "machine.ca.crt", "machine.time", "cluster.name"} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error does not list %s:\n%v", path, err)
		}
	}

	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state directory was created: %v", err)
	}
}

func TestMissingBinariesStartNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c, err := certs.GenerateMachineConfig(b, certs.NodeControlPlane, certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.0.0.1", TrustHostClock: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(dir, "cp.yaml")
	if err = c.Save(cfg, false); err != nil {
		t.Fatal(err)
	}

	state := filepath.Join(dir, "state")

	err = run(context.Background(), []string{"--config", cfg, "--state", state, "--bin-dir", filepath.Join(dir, "nobin")}, io.Discard, &bytes.Buffer{}, &inherit.Set{})
	if err == nil || !strings.Contains(err.Error(), "binary apid not found") {
		t.Fatalf("err = %v", err)
	}

	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state directory was created: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--config", "c"}, {"--state", "s"}, {"--config", "c", "--state", "s", "extra"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}

	o, err := parseFlags([]string{"--config", "c.yaml", "--state", "s", "--bin-dir", "b"}, &bytes.Buffer{})
	if err != nil || !filepath.IsAbs(o.state) || !filepath.IsAbs(o.config) || !filepath.IsAbs(o.binDir) {
		t.Fatalf("options = %+v, %v; want absolute paths", o, err)
	}
}

func TestVersionAndLogLevel(t *testing.T) {
	var stdout bytes.Buffer

	// --version needs no other flag and starts nothing.
	if err := run(context.Background(), []string{"--version"}, &stdout, io.Discard, &inherit.Set{}); err != nil {
		t.Fatal(err)
	}

	if !strings.HasPrefix(stdout.String(), "machined v") {
		t.Fatalf("--version printed %q", stdout.String())
	}

	for _, lvl := range []string{"debug", "info", "warn", "error"} {
		if _, err := parseFlags([]string{"--config", "c", "--state", "s", "--log-level", lvl}, io.Discard); err != nil {
			t.Errorf("--log-level %s: %v", lvl, err)
		}
	}

	for _, format := range []string{"json", "text"} {
		o, err := parseFlags([]string{"--config", "c", "--state", "s", "--log-format", format}, io.Discard)
		if err != nil || o.Format.String() != format {
			t.Errorf("--log-format %s: %q, %v", format, o.Format, err)
		}
	}

	if _, err := parseFlags([]string{"--config", "c", "--state", "s", "--log-format", "xml"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "use json or text") {
		t.Errorf("--log-format xml: %v", err)
	}

	var stderr bytes.Buffer

	_, err := parseFlags([]string{"--config", "c", "--state", "s", "--log-level", "loud"}, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown log level "loud": use debug, info, warn or error`) {
		t.Fatalf("bad level: %v", err)
	}
}
