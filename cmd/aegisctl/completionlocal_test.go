package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

// writeLocalCluster writes the manifest of a local cluster as 'cluster
// create' leaves it in stateDir.
func writeLocalCluster(t *testing.T, stateDir, name, manifest string) {
	t.Helper()

	dir := filepath.Join(stateDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCompletionLocal(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)

	state := filepath.Join(home, ".aegis", "clusters")
	writeLocalCluster(t, state, "aegis-local", `{"name":"aegis-local","nodes":[{"name":"cp-1","address":"127.5.0.2"},{"name":"w-1","address":"127.5.0.3"}]}`)
	writeLocalCluster(t, state, "lab", `{"name":"lab","nodes":[{"name":"cp-1","address":"127.6.0.2"}]}`)
	writeLocalCluster(t, state, "broken", `{`)

	other := t.TempDir()
	writeLocalCluster(t, other, "elsewhere", `{"name":"elsewhere"}`)

	noConfig := []string{"--aegisconfig", filepath.Join(home, "none")}

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "cluster show --name", args: []string{"cluster", "show", "--name", ""}, want: []string{"aegis-local", "lab"}},
		{name: "cluster destroy --name", args: []string{"cluster", "destroy", "--name", ""}, want: []string{"aegis-local", "lab"}},
		{name: "cluster readmit --name", args: []string{"cluster", "readmit", "--name", ""}, want: []string{"aegis-local", "lab"}},
		{name: "--name of --state-dir", args: []string{"cluster", "show", "--state-dir", other, "--name", ""}, want: []string{"elsewhere"}},
		{name: "get TYPE", args: []string{"get", ""}, want: []string{"rd", "members", "machinestatus", "services", "certs", "ntp", "aegisconfig", "upgrade"}},
		{name: "get TYPE ID", args: []string{"get", "certs", ""}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := complete(t, append(slices.Clone(noConfig), tt.args...)...); !slices.Equal(got, tt.want) {
				t.Fatalf("completions = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("nodes of the local clusters after the context's", func(t *testing.T) {
		path := filepath.Join(home, "aegisconfig")
		c := &certs.ClientConfig{Context: "prod", Contexts: map[string]*certs.ClientContext{
			"prod": {Endpoints: []string{"10.0.0.5"}, Nodes: []string{"127.5.0.2"}},
		}}
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}

		got := complete(t, "--aegisconfig", path, "-n", "")
		want := []string{"127.5.0.2", "10.0.0.5", "127.5.0.3", "127.6.0.2"}

		if !slices.Equal(got, want) {
			t.Fatalf("completions = %q, want %q", got, want)
		}
	})
}
