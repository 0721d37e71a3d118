package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
)

var testNow = time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)

// run executes aegisctl in-process in dir with args and returns its output.
func run(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()

	var out bytes.Buffer

	e := &env{clock: clock.NewFake(testNow), stdout: &out, stderr: &out}
	cmd := newRootCommand(e)
	cmd.SetArgs(args)

	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd) //nolint:errcheck // back to the package directory

	err := cmd.Execute()

	return out.String(), err
}

func mustRun(t *testing.T, dir string, args ...string) string {
	t.Helper()

	out, err := run(t, dir, args...)
	if err != nil {
		t.Fatalf("aegisctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	return out
}

func TestGenSecretsAndConfig(t *testing.T) {
	dir := t.TempDir()

	out := mustRun(t, dir, "gen", "secrets")
	for _, want := range []string{"wrote secrets.yaml", "os CA", "Ed25519", "sha256:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("gen secrets output lacks %q:\n%s", want, out)
		}
	}

	assertMode(t, filepath.Join(dir, "secrets.yaml"), 0o600)

	if _, err := run(t, dir, "gen", "secrets"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second gen secrets: %v", err)
	}

	mustRun(t, dir, "gen", "secrets", "--force")

	out = mustRun(t, dir, "gen", "config", "demo", "127.5.0.2", "--with-secrets", "secrets.yaml", "-o", "cfg")
	if !strings.Contains(out, "roles:") || !strings.Contains(out, "os:admin") {
		t.Fatalf("gen config output:\n%s", out)
	}

	bundle, err := certs.LoadBundle(filepath.Join(dir, "secrets.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	cp, err := certs.LoadMachineConfig(filepath.Join(dir, "cfg", "controlplane.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	worker, err := certs.LoadMachineConfig(filepath.Join(dir, "cfg", "worker.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	if cp.Machine.Token != bundle.TrustdInfo.Token || cp.OSCA() == nil || worker.OSCA() != nil {
		t.Fatal("configs do not come from the bundle as expected")
	}

	client, err := certs.LoadClientConfig(filepath.Join(dir, "cfg", "aegisconfig"))
	if err != nil {
		t.Fatal(err)
	}

	_, ctx, err := client.Current()
	if err != nil || !slices.Equal(ctx.Endpoints, []string{"127.5.0.2"}) {
		t.Fatalf("client context: %v %v", ctx, err)
	}

	crt, err := ca.ParseCertificate(ctx.Crt)
	if err != nil {
		t.Fatal(err)
	}

	if err := cp.AcceptedCAs().Verify(crt, x509.ExtKeyUsageClientAuth, testNow); err != nil {
		t.Fatalf("admin certificate does not verify against the node's CAs: %v", err)
	}

	if got := crt.NotAfter.Sub(crt.NotBefore); got != 365*24*time.Hour {
		t.Fatalf("admin certificate lifetime = %s", got)
	}

	for _, f := range []string{"controlplane.yaml", "worker.yaml", "aegisconfig"} {
		assertMode(t, filepath.Join(dir, "cfg", f), 0o600)
	}
}

func TestGenConfigWithoutSecretsWritesBundle(t *testing.T) {
	dir := t.TempDir()

	mustRun(t, dir, "gen", "config", "demo", "10.0.0.1", "--trust-host-clock")

	b, err := certs.LoadBundle(filepath.Join(dir, "secrets.yaml"), testNow)
	if err != nil {
		t.Fatalf("generated bundle not saved: %v", err)
	}

	cp, err := certs.LoadMachineConfig(filepath.Join(dir, "controlplane.yaml"), testNow)
	if err != nil {
		t.Fatal(err)
	}

	if cp.Machine.Token != b.TrustdInfo.Token || !cp.Machine.Time.TrustHostClock || len(cp.Machine.Time.Servers) != 0 {
		t.Fatal("config does not match the saved bundle or flags")
	}
}

func TestGenConfigRefusalsWriteNothing(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "endpoint with port", args: []string{"demo", "10.0.0.1:6443"}, want: "without a port"},
		{name: "URL endpoint", args: []string{"demo", "https://10.0.0.1"}, want: "ENDPOINT"},
		{name: "bad cluster name", args: []string{"Demo_1", "10.0.0.1"}, want: "cluster.name"},
		{name: "bad time server", args: []string{"demo", "10.0.0.1", "--time-server", "ntp:99999"}, want: "machine.time.servers[0]"},
		{name: "missing bundle", args: []string{"demo", "10.0.0.1", "--with-secrets", "nope.yaml"}, want: "nope.yaml"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()

			_, err := run(t, dir, append([]string{"gen", "config"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}

			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("refused command left %d files", len(entries))
			}
		})
	}

	t.Run("existing file blocks all", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "worker.yaml"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}

		if _, err := run(t, dir, "gen", "config", "demo", "10.0.0.1"); err == nil {
			t.Fatal("overwrote worker.yaml")
		}

		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("refused command wrote files: %d entries", len(entries))
		}

		if data, _ := os.ReadFile(filepath.Join(dir, "worker.yaml")); string(data) != "mine" {
			t.Fatal("existing file changed")
		}
	})
}

func TestGenPKIChain(t *testing.T) {
	dir := t.TempDir()

	mustRun(t, dir, "gen", "ca", "--name", "root", "--key-type", "ecdsa-p256")
	assertMode(t, filepath.Join(dir, "root.key"), 0o600)

	mustRun(t, dir, "gen", "key", "--name", "ops")
	assertMode(t, filepath.Join(dir, "ops.key"), 0o600)

	mustRun(t, dir, "gen", "csr", "--key", "ops.key", "--ip", "10.0.0.5", "--dns", "ops.example")
	out := mustRun(t, dir, "gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "ops", "--roles", "os:reader,os:operator", "--ttl", "720h")

	if !strings.Contains(out, "wrote ops.crt (client profile)") || !strings.Contains(out, "os:reader") {
		t.Fatalf("gen crt output:\n%s", out)
	}

	pemBytes, err := os.ReadFile(filepath.Join(dir, "ops.crt"))
	if err != nil {
		t.Fatal(err)
	}

	cert, err := ca.ParseCertificate(pemBytes)
	if err != nil {
		t.Fatal(err)
	}

	if got := slices.Sorted(slices.Values(cert.Subject.Organization)); !slices.Equal(got, []string{"os:operator", "os:reader"}) {
		t.Fatalf("organization = %q", got)
	}

	if cert.NotAfter.Sub(cert.NotBefore) != 720*time.Hour || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Fatal("wrong lifetime or usage")
	}

	mustRun(t, dir, "gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "web", "--profile", "server")

	for _, bad := range [][]string{
		{"gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "x", "--roles", "os:root"},
		{"gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "x", "--roles", "os:impersonator"},
		{"gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "x", "--profile", "server", "--roles", "os:admin"},
		{"gen", "crt", "--ca", "root", "--csr", "ops.csr", "--name", "ops"},
		{"gen", "crt", "--ca", "ops", "--csr", "ops.csr", "--name", "x"},
		{"gen", "csr", "--key", "ops.key", "--dns", "*.example", "-o", "x.csr"},
	} {
		if _, err := run(t, dir, bad...); err == nil {
			t.Fatalf("aegisctl %s succeeded", strings.Join(bad, " "))
		}
	}

	if fileExists(filepath.Join(dir, "x.crt")) || fileExists(filepath.Join(dir, "x.csr")) {
		t.Fatal("a refused command wrote a file")
	}
}

func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "client")

	mustRun(t, dir, "gen", "config", "alpha", "10.0.0.1", "-o", "a", "--trust-host-clock")
	mustRun(t, dir, "gen", "config", "alpha", "10.0.0.9", "-o", "b", "--trust-host-clock")

	mustRun(t, dir, "--aegisconfig", cfg, "config", "merge", "a/aegisconfig")
	out := mustRun(t, dir, "--aegisconfig", cfg, "config", "merge", "b/aegisconfig")

	if !strings.Contains(out, `added as "alpha-1"`) {
		t.Fatalf("merge output:\n%s", out)
	}

	out = mustRun(t, dir, "--aegisconfig", cfg, "config", "contexts")
	if current := linesWith(out, "*"); len(current) != 1 || !strings.Contains(current[0], "alpha-1") {
		t.Fatalf("contexts output does not mark alpha-1 current:\n%s", out)
	}

	mustRun(t, dir, "--aegisconfig", cfg, "config", "context", "alpha")
	mustRun(t, dir, "--aegisconfig", cfg, "config", "endpoint", "10.0.0.1,10.0.0.2", "10.0.0.3")
	mustRun(t, dir, "--aegisconfig", cfg, "config", "node", "10.0.0.7")

	c, err := certs.LoadClientConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if c.Context != "alpha" || !slices.Equal(c.Contexts["alpha"].Endpoints, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}) ||
		!slices.Equal(c.Contexts["alpha"].Nodes, []string{"10.0.0.7"}) || c.Contexts["alpha-1"].Endpoints[0] != "10.0.0.9" {
		t.Fatalf("config after edits: %+v", c)
	}

	t.Setenv(certs.EnvClientConfig, cfg)

	out = mustRun(t, dir, "config", "info")
	for _, want := range []string{"context:   alpha", "os:admin", "10.0.0.7", "CA", "sha256:", "(in 364d)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("info output lacks %q:\n%s", want, out)
		}
	}

	if out = mustRun(t, dir, "config", "info", "--context", "alpha-1"); !strings.Contains(out, "context:   alpha-1") || !strings.Contains(out, "10.0.0.9") {
		t.Fatalf("info --context alpha-1:\n%s", out)
	}

	if _, err := run(t, dir, "config", "context", "nope"); err == nil || !strings.Contains(err.Error(), "alpha-1") {
		t.Fatalf("switching to a missing context: %v", err)
	}

	if _, err := run(t, dir, "config", "endpoint", "bad host"); err == nil {
		t.Fatal("bad endpoint accepted")
	}

	mustRun(t, dir, "config", "merge", "b/aegisconfig", "--force")

	c, _ = certs.LoadClientConfig(cfg)
	if len(c.Contexts) != 2 || c.Contexts["alpha"].Endpoints[0] != "10.0.0.9" {
		t.Fatalf("forced merge did not replace alpha: %+v", c.Contexts)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != want {
		t.Fatalf("%s mode = %v, want %v", path, st.Mode().Perm(), want)
	}
}

func linesWith(out, substr string) []string {
	var lines []string

	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, substr) {
			lines = append(lines, l)
		}
	}

	return lines
}

// TestTalosConfigFallback: without --aegisconfig and $AEGISCONFIG, the
// talosconfig of $TALOSCONFIG is read, and a field of another tool in it
// (Omni's auth) is shown as kept, not refused.
func TestTalosConfigFallback(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "gen", "config", "alpha", "10.0.0.1", "--trust-host-clock")

	data, err := os.ReadFile(filepath.Join(dir, "aegisconfig"))
	if err != nil {
		t.Fatal(err)
	}

	data = []byte(strings.Replace(string(data), "    alpha:\n", "    alpha:\n        auth:\n            siderov1:\n                identity: ops@example.com\n", 1))
	if err = os.WriteFile(filepath.Join(dir, "talosconfig"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv(certs.EnvClientConfig, "")
	t.Setenv(certs.EnvTalosConfig, filepath.Join(dir, "talosconfig"))

	out := mustRun(t, dir, "config", "info")
	if !strings.Contains(out, "context:      alpha") || !strings.Contains(out, "other fields: auth (kept, not read by Aegis)") {
		t.Fatalf("config info through $TALOSCONFIG:\n%s", out)
	}

	mustRun(t, dir, "config", "node", "10.0.0.7")

	if after, _ := os.ReadFile(filepath.Join(dir, "talosconfig")); !strings.Contains(string(after), "identity: ops@example.com") {
		t.Fatalf("rewrite lost the auth field:\n%s", after)
	}
}
