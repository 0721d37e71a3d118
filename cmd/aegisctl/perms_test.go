package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWarnsOfSharedKeys: a client config, a key or a secrets bundle that
// others may read is used, with a warning that names it and the chmod
// that fixes it; at 0600 nothing is said.
func TestWarnsOfSharedKeys(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "gen", "config", "alpha", "10.0.0.1", "-o", ".", "--trust-host-clock")
	mustRun(t, dir, "gen", "key", "--name", "node")

	cfg := filepath.Join(dir, "aegisconfig")

	// Each case names the file as the command was given it, and runs
	// twice: at 0600, then at 0644 (--force: the first run wrote the output).
	for _, tt := range []struct {
		file, what string
		args       []string
	}{
		{cfg, "client config", []string{"--aegisconfig", cfg, "config", "info"}},
		{"node.key", "key", []string{"gen", "csr", "--key", "node.key", "--ip", "10.0.0.5"}},
		{"secrets.yaml", "secrets bundle", []string{"gen", "config", "alpha", "10.0.0.1", "-o", "again", "--with-secrets", "secrets.yaml", "--trust-host-clock"}},
	} {
		t.Run(tt.what, func(t *testing.T) {
			path := tt.file
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}

			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}

			if out := mustRun(t, dir, tt.args...); strings.Contains(out, "warning:") {
				t.Fatalf("warned at 0600:\n%s", out)
			}

			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}

			args := tt.args
			if tt.what != "client config" {
				args = append(slices.Clone(args), "--force")
			}

			out := mustRun(t, dir, args...)
			want := "warning: " + tt.what + " " + tt.file + " is readable by others (mode 0644) and holds a private key: run 'chmod 600 " + tt.file + "'"

			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}
