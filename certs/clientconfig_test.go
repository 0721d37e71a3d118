package certs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestMerge(t *testing.T) {
	newCfg := func(current string, names ...string) *certs.ClientConfig {
		c := &certs.ClientConfig{Context: current, Contexts: map[string]*certs.ClientContext{}}
		for _, n := range names {
			c.Contexts[n] = &certs.ClientContext{Endpoints: []string{n + ".example"}}
		}

		return c
	}

	tests := []struct {
		name        string
		base, other *certs.ClientConfig
		force       bool
		wantCurrent string
		wantNames   []string
		wantRenames []certs.Rename
		wantOwner   map[string]string // context -> endpoint it must hold
	}{
		{
			name: "no clash", base: newCfg("a", "a"), other: newCfg("b", "b"),
			wantCurrent: "b", wantNames: []string{"a", "b"},
		},
		{
			name: "clash is renamed", base: newCfg("demo", "demo", "demo-1"), other: newCfg("demo", "demo"),
			wantCurrent: "demo-2", wantNames: []string{"demo", "demo-1", "demo-2"},
			wantRenames: []certs.Rename{{From: "demo", To: "demo-2"}},
		},
		{
			name: "force overwrites", base: newCfg("demo", "demo", "keep"), other: newCfg("demo", "demo"), force: true,
			wantCurrent: "demo", wantNames: []string{"demo", "keep"},
		},
		{
			name: "into empty", base: &certs.ClientConfig{}, other: newCfg("x", "x", "y"),
			wantCurrent: "x", wantNames: []string{"x", "y"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := map[string]*certs.ClientContext{}
			for k, v := range tt.base.Contexts {
				original[k] = v
			}

			renames := tt.base.Merge(tt.other, tt.force)

			if tt.base.Context != tt.wantCurrent {
				t.Fatalf("current = %q, want %q", tt.base.Context, tt.wantCurrent)
			}

			names := slices.Sorted(func(yield func(string) bool) {
				for k := range tt.base.Contexts {
					if !yield(k) {
						return
					}
				}
			})
			if !slices.Equal(names, tt.wantNames) {
				t.Fatalf("contexts = %q, want %q", names, tt.wantNames)
			}

			if !slices.Equal(renames, tt.wantRenames) {
				t.Fatalf("renames = %v, want %v", renames, tt.wantRenames)
			}

			if !tt.force {
				for k, v := range original {
					if tt.base.Contexts[k] != v {
						t.Fatalf("context %q was overwritten without force", k)
					}
				}
			}
		})
	}
}

func TestClientConfigSaveAndDefaultPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "config")
	t.Setenv(certs.EnvClientConfig, path)

	got, err := certs.DefaultClientConfigPath()
	if err != nil || got != path {
		t.Fatalf("DefaultClientConfigPath = %q, %v", got, err)
	}

	c, err := certs.LoadOrNewClientConfig(path)
	if err != nil {
		t.Fatalf("missing file should give an empty config: %v", err)
	}

	c.Merge(&certs.ClientConfig{Context: "a", Contexts: map[string]*certs.ClientContext{"a": {Endpoints: []string{"127.0.0.1"}}}}, false)

	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}

	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved config mode = %v, %v", st.Mode().Perm(), err)
	}

	loaded, err := certs.LoadClientConfig(path)
	if err != nil || loaded.Context != "a" {
		t.Fatalf("reload: %v", err)
	}

	t.Setenv(certs.EnvClientConfig, "")
	t.Setenv(certs.EnvTalosConfig, "")
	t.Setenv("HOME", dir)

	if got, _ := certs.DefaultClientConfigPath(); got != filepath.Join(dir, ".aegis", "config") {
		t.Fatalf("default path = %q", got)
	}
}

func TestClientConfigProblems(t *testing.T) {
	doc := `context: missing
contexts:
    a:
        endpoints:
            - "bad host"
        nodes:
            - 10.0.0.1:0
        crt: aGVsbG8=
    b:
        endpoints: [127.0.0.1]
        auth: {}
`

	_, err := certs.ParseClientConfig("aegisconfig", []byte(doc))

	var verr *certs.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v", err)
	}

	// Another tool's field (Omni's auth) is no problem; the others are.
	var paths []string
	for _, p := range verr.Problems {
		paths = append(paths, p.Path)
	}

	want := []string{"context", "contexts.a.endpoints[0]", "contexts.a.nodes[0]", "contexts.a"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
}

// TestClientConfigKeepsUnknownFields: a talosconfig with fields Aegis does
// not read (Omni's auth, a top-level field of a newer Talos) loads, and a
// rewrite keeps those fields as they were.
func TestClientConfigKeepsUnknownFields(t *testing.T) {
	doc := `context: omni
contexts:
    omni:
        endpoints:
            - https://omni.example:443
        auth:
            siderov1:
                identity: ops@example.com
    local:
        endpoints: [127.0.0.1]
        nodes: [127.0.0.2]
        cluster: demo
        future: [1, 2]
preferences:
    color: false
`
	path := filepath.Join(t.TempDir(), "talosconfig")
	if err := os.WriteFile(path, []byte(strings.Replace(doc, "https://omni.example:443", "omni.example:443", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatalf("unknown fields refused: %v", err)
	}

	if c.Contexts["local"].Cluster != "demo" || c.Contexts["omni"].Endpoints[0] != "omni.example:443" {
		t.Fatalf("known fields not read: %+v", c.Contexts)
	}

	c.Context = "local"
	if err = c.Save(path); err != nil {
		t.Fatal(err)
	}

	again, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]any{"siderov1": map[string]any{"identity": "ops@example.com"}}
	if got := again.Contexts["omni"].Unknown["auth"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("auth after rewrite = %#v, want %#v", got, want)
	}

	if got := again.Contexts["local"].Unknown["future"]; !reflect.DeepEqual(got, []any{1, 2}) {
		t.Fatalf("future after rewrite = %#v", got)
	}

	if got := again.Unknown["preferences"]; !reflect.DeepEqual(got, map[string]any{"color": false}) {
		t.Fatalf("top-level field after rewrite = %#v", got)
	}

	// Types of the known fields are still checked, and aliases refused
	// inside unknown fields too.
	for _, bad := range []string{
		"context: a\ncontexts:\n    a:\n        endpoints: 5\n        auth: {}\n",
		"context: a\nx: &x [1]\ncontexts:\n    a:\n        endpoints: [127.0.0.1]\n        auth: {y: *x}\n",
	} {
		if _, err := certs.ParseClientConfig("bad", []byte(bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

func TestClientConfigPathOrder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)

	tests := []struct {
		name, aegis, talos, want string
	}{
		{name: "AEGISCONFIG first", aegis: "/a/config", talos: "/t/config", want: "/a/config"},
		{name: "TALOSCONFIG next", talos: "/t/config", want: "/t/config"},
		{name: "default last", want: filepath.Join(home, ".aegis", "config")},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(certs.EnvClientConfig, tt.aegis)
			t.Setenv(certs.EnvTalosConfig, tt.talos)

			if got, err := certs.DefaultClientConfigPath(); err != nil || got != tt.want {
				t.Fatalf("DefaultClientConfigPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzParseClientConfig(f *testing.F) {
	f.Add([]byte(readGolden(f, goldenClient)))
	f.Add([]byte("context: a\ncontexts:\n    a:\n        endpoints: [127.0.0.1]\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := certs.ParseClientConfig("fuzz", data)
		if err != nil {
			return
		}

		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		if _, err := certs.ParseClientConfig("again", out); err != nil {
			t.Fatalf("re-encoded config refused: %v", err)
		}
	})
}

func TestReplaceCredentials(t *testing.T) {
	newConfig := func() *certs.ClientConfig {
		return &certs.ClientConfig{Context: "a", Contexts: map[string]*certs.ClientContext{
			"a": {Endpoints: []string{"10.0.0.1"}, CA: []byte("ca"), Crt: []byte("old"), Key: []byte("oldkey")},
			"b": {Endpoints: []string{"10.0.0.2"}, CA: []byte("ca"), Crt: []byte("old"), Key: []byte("bkey")},
		}}
	}

	c := newConfig()
	if err := c.ReplaceCredentials("a", []byte("old"), []byte("new"), []byte("newkey")); err != nil {
		t.Fatal(err)
	}

	// A renewal never changes what the context trusts.
	a, b := c.Contexts["a"], c.Contexts["b"]
	if string(a.Crt) != "new" || string(a.Key) != "newkey" || string(a.CA) != "ca" || a.Endpoints[0] != "10.0.0.1" {
		t.Fatalf("context a after replace: %+v", a)
	}

	if string(b.Crt) != "old" || string(b.Key) != "bkey" {
		t.Fatal("another context changed")
	}

	c = newConfig()
	if err := c.ReplaceCredentials("a", []byte("stale"), []byte("new"), []byte("newkey")); !errors.Is(err, certs.ErrCredentialsChanged) {
		t.Fatalf("replace over changed credentials: %v", err)
	}

	if string(c.Contexts["a"].Crt) != "old" {
		t.Fatal("refused replace changed the context")
	}

	if err := c.ReplaceCredentials("zz", nil, nil, nil); err == nil {
		t.Fatal("missing context accepted")
	}
}

func TestReplaceCredentialsInFile(t *testing.T) {
	b, err := certs.GenerateBundle(certs.BundleOptions{Clock: catest.FixedClock(testutil.Epoch)})
	if err != nil {
		t.Fatal(err)
	}

	admin := func(name string) *certs.ClientConfig {
		c, err := certs.AdminClientConfig(b, name, []string{"10.0.0.1"}, 0, testutil.Epoch)
		if err != nil {
			t.Fatal(err)
		}

		return c
	}

	path := filepath.Join(t.TempDir(), "aegisconfig")
	cfg := admin("a")

	if err = cfg.Save(path); err != nil {
		t.Fatal(err)
	}

	oldCrt := cfg.Contexts["a"].Crt

	// Someone adds a context between the start of the renewal and its end.
	onDisk, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	onDisk.Merge(admin("b"), false)
	onDisk.Context = "a"

	if err = onDisk.Save(path); err != nil {
		t.Fatal(err)
	}

	renewed := admin("a").Contexts["a"]

	ctx, err := certs.ReplaceCredentialsInFile(path, "a", oldCrt, renewed.Crt, renewed.Key)
	if err != nil {
		t.Fatal(err)
	}

	after, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	if got := after.Contexts["a"]; !bytes.Equal(got.Crt, renewed.Crt) || !bytes.Equal(got.Key, renewed.Key) || !bytes.Equal(ctx.Crt, renewed.Crt) {
		t.Fatal("the renewed credentials are not in the file")
	}

	if _, ok := after.Contexts["b"]; !ok {
		t.Fatal("a context added meanwhile was lost")
	}

	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v: want 0600", st.Mode(), err)
	}

	_, err = certs.ReplaceCredentialsInFile(path, "a", oldCrt, oldCrt, nil)
	if !errors.Is(err, certs.ErrCredentialsChanged) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("stale credentials: err %v, want ErrCredentialsChanged naming %s", err, path)
	}
}
