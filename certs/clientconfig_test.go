package certs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aegis-os/aegis/certs"
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

	// The unknown field is found first; the document is not decoded further.
	if len(verr.Problems) != 1 || verr.Problems[0].Path != "contexts.b.auth" {
		t.Fatalf("problems = %v", verr.Problems)
	}

	_, err = certs.ParseClientConfig("aegisconfig", []byte(doc[:len(doc)-len("        auth: {}\n")]))
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v", err)
	}

	var paths []string
	for _, p := range verr.Problems {
		paths = append(paths, p.Path)
	}

	want := []string{"context", "contexts.a.endpoints[0]", "contexts.a.nodes[0]", "contexts.a"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
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
