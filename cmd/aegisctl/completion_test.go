package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/certs"
)

// complete runs cobra's hidden __complete command, as a shell does, and
// returns the candidates it prints.
func complete(t *testing.T, args ...string) []string {
	t.Helper()

	out, _, err := runCLI(t, time.Now(), append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatalf("__complete %q: %v", args, err)
	}

	var got []string

	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}

	return got
}

func TestCompletion(t *testing.T) {
	// No local clusters: -n and -e offer only the context's addresses.
	t.Setenv("HOME", t.TempDir())

	path := filepath.Join(t.TempDir(), "aegisconfig")
	c := &certs.ClientConfig{Context: "prod", Contexts: map[string]*certs.ClientContext{
		"prod":    {Endpoints: []string{"10.0.0.1:50000", "10.0.0.2"}, Nodes: []string{"10.0.0.5", "10.0.0.1"}},
		"staging": {Endpoints: []string{"10.1.0.1"}},
	}}

	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}

	cfg := []string{"--aegisconfig", path}

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "contexts", args: []string{"--context", ""}, want: []string{"prod", "staging"}},
		{name: "contexts of --talosconfig", args: []string{"--aegisconfig", "", "--talosconfig", path, "--context", ""}, want: []string{"prod", "staging"}},
		{name: "config context NAME", args: []string{"config", "context", ""}, want: []string{"prod", "staging"}},
		{name: "config remove: not the current one", args: []string{"config", "remove", ""}, want: []string{"staging"}},
		{name: "config context takes one", args: []string{"config", "context", "prod", ""}},
		{name: "nodes of the current context", args: []string{"-n", ""}, want: []string{"10.0.0.5", "10.0.0.1", "10.0.0.2"}},
		{name: "nodes after a comma", args: []string{"-n", "10.0.0.5,"}, want: []string{"10.0.0.5,10.0.0.1", "10.0.0.5,10.0.0.2"}},
		{name: "nodes of --context", args: []string{"--context", "staging", "memory", "-n", ""}, want: []string{"10.1.0.1"}},
		{name: "endpoints", args: []string{"-e", ""}, want: []string{"10.0.0.5", "10.0.0.1", "10.0.0.2"}},
		{name: "health nodes", args: []string{"health", "--worker-nodes", ""}, want: []string{"10.0.0.5", "10.0.0.1", "10.0.0.2"}},
		{name: "output formats", args: []string{"memory", "-o", ""}, want: []string{"table", "json", "yaml"}},
		{name: "output formats of config info", args: []string{"config", "info", "-o", ""}, want: []string{"table", "json", "yaml"}},
		{name: "service actions after the ID", args: []string{"service", "apid", ""}, want: []string{"status", "start", "stop", "restart"}},
		{name: "service IDs, nodes unreachable", args: []string{"-e", "127.0.0.1:1", "service", ""}, want: []string{"apid"}},
		{name: "log IDs, nodes unreachable", args: []string{"-e", "127.0.0.1:1", "logs", ""}, want: []string{"apid", "machined"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := complete(t, append(slices.Clone(cfg), tt.args...)...); !slices.Equal(got, tt.want) {
				t.Fatalf("completions = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("no client config completes nothing", func(t *testing.T) {
		if got := complete(t, "--aegisconfig", filepath.Join(t.TempDir(), "none"), "--context", ""); len(got) != 0 {
			t.Fatalf("completions = %q", got)
		}
	})
}

// TestCompletionAsksTheNodes: service IDs come from the nodes themselves.
func TestCompletionAsksTheNodes(t *testing.T) {
	c := newTestCluster(t, nil)
	c.writeConfig(t, role.Reader)

	got := complete(t, "--aegisconfig", c.config, "-n", c.nodes[0].IP+","+c.nodes[1].IP, "service", "")
	if !slices.Equal(got, []string{"apid", "timed", "trustd"}) {
		t.Fatalf("service IDs = %q", got)
	}

	if got = complete(t, "--aegisconfig", c.config, "logs", ""); !slices.Equal(got, []string{"apid", "timed", "trustd", "machined"}) {
		t.Fatalf("log IDs = %q", got)
	}
}
