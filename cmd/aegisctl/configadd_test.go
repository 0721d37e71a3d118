package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/certs"
)

func TestConfigAddRemove(t *testing.T) {
	dir := t.TempDir()
	pki := apidtest.NewPKI(t)
	pair := pki.Client(t, role.Reader)

	files := map[string][]byte{"ca.crt": pki.CA.CertPEM, "admin.crt": pair.CertPEM, "admin.key": pair.KeyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	config := filepath.Join(dir, "aegisconfig")
	run := func(args ...string) error {
		_, _, err := runCLI(t, time.Now(), append([]string{"--aegisconfig", config}, args...)...)

		return err
	}
	add := func(name, key string) error {
		return run("config", "add", name, "-e", "10.0.0.2,10.0.0.3", "-n", "10.0.0.2",
			"--ca", filepath.Join(dir, "ca.crt"), "--crt", filepath.Join(dir, "admin.crt"), "--key", filepath.Join(dir, key))
	}

	if err := add("lab", "admin.key"); err != nil {
		t.Fatalf("config add: %v", err)
	}

	c, err := certs.LoadClientConfig(config)
	if err != nil {
		t.Fatal(err)
	}

	ctx := c.Contexts["lab"]
	if ctx == nil || strings.Join(ctx.Endpoints, ",") != "10.0.0.2,10.0.0.3" || strings.Join(ctx.Nodes, ",") != "10.0.0.2" ||
		string(ctx.Key) != string(pair.KeyPEM) || c.Context != "" {
		t.Fatalf("config after add = %+v, context %q", ctx, c.Context)
	}

	refusals := []struct {
		name string
		err  func() error
		want string
	}{
		{name: "name taken", err: func() error { return add("lab", "admin.key") }, want: "remove it first"},
		{name: "key of another certificate", err: func() error { return add("other", "ca.crt") }, want: "do not make a client certificate"},
		{name: "remove unknown", err: func() error { return run("config", "remove", "nope") }, want: `no context "nope"`},
		{name: "remove current", err: func() error {
			if err := run("config", "context", "lab"); err != nil {
				return err
			}

			return run("config", "remove", "lab")
		}, want: "is the current one"},
	}

	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			if err := r.err(); err == nil || !strings.Contains(err.Error(), r.want) {
				t.Fatalf("err = %v, want %q", err, r.want)
			}
		})
	}

	if err := add("old", "admin.key"); err != nil {
		t.Fatal(err)
	}

	if err := run("config", "remove", "old"); err != nil {
		t.Fatalf("config remove: %v", err)
	}

	if c, _ = certs.LoadClientConfig(config); c.Contexts["old"] != nil || c.Contexts["lab"] == nil {
		t.Fatalf("contexts after remove: %v", contextNames(c))
	}
}
