package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

func TestTargetFlags(t *testing.T) {
	ctx := &certs.ClientContext{Endpoints: []string{"10.0.0.1"}, Nodes: []string{"10.0.0.5"}}

	tests := []struct {
		name      string
		args      []string
		ctx       *certs.ClientContext
		endpoints []string
		nodes     []string
		err       string
	}{
		{name: "context defaults", ctx: ctx, endpoints: []string{"10.0.0.1"}, nodes: []string{"10.0.0.5"}},
		{
			name: "repeated and comma lists", ctx: ctx,
			args:      []string{"-e", "10.0.0.2,10.0.0.3", "--endpoints", "10.0.0.4:50010", "-n", "a.example", "-n", "b.example, c.example"},
			endpoints: []string{"10.0.0.2", "10.0.0.3", "10.0.0.4:50010"}, nodes: []string{"a.example", "b.example", "c.example"},
		},
		{name: "nodes only", ctx: ctx, args: []string{"--nodes=10.0.0.9"}, endpoints: []string{"10.0.0.1"}, nodes: []string{"10.0.0.9"}},
		{name: "no nodes anywhere", ctx: &certs.ClientContext{Endpoints: []string{"10.0.0.1"}}, endpoints: []string{"10.0.0.1"}},
		{name: "no endpoints", ctx: &certs.ClientContext{}, err: "has no endpoints: give -e ADDR"},
		{name: "bad endpoint", ctx: ctx, args: []string{"-e", "bad host"}, err: "bad host"},
		{name: "bad node", ctx: ctx, args: []string{"-n", "10.0.0.1:99999"}, err: "99999"},
		{name: "node with a port", ctx: ctx, args: []string{"-n", "10.0.0.1:50000"}, err: `"10.0.0.1:50000": ports are not allowed`},
		{name: "context node with a port", ctx: &certs.ClientContext{Endpoints: []string{"10.0.0.1"}, Nodes: []string{"10.0.0.5:22"}}, err: "ports are not allowed"},
		{name: "node URL", ctx: ctx, args: []string{"-n", "https://10.0.0.1/"}, err: "not an IP address or a DNS name"},
		{
			name: "nodes canonical and once", ctx: ctx, args: []string{"-n", "10.0.0.9,::ffff:10.0.0.9,[FD00::1],fd00:0::1,CP.example."},
			endpoints: []string{"10.0.0.1"}, nodes: []string{"10.0.0.9", "fd00::1", "cp.example"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv()
			root := newRootCommand(e)

			if err := root.PersistentFlags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}

			endpoints, nodes, err := e.target.resolve("test", tt.ctx)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.err)
				}

				return
			}

			if err != nil || !slices.Equal(endpoints, tt.endpoints) || !slices.Equal(nodes, tt.nodes) {
				t.Fatalf("resolve = %q %q %v, want %q %q", endpoints, nodes, err, tt.endpoints, tt.nodes)
			}
		})
	}
}

func TestPickContext(t *testing.T) {
	cfg := &certs.ClientConfig{Context: "a", Contexts: map[string]*certs.ClientContext{"a": {}, "b": {}}}

	if name, _, err := pickContext(cfg, ""); err != nil || name != "a" {
		t.Fatalf("current: %q %v", name, err)
	}

	if name, _, err := pickContext(cfg, "b"); err != nil || name != "b" {
		t.Fatalf("--context b: %q %v", name, err)
	}

	if _, _, err := pickContext(cfg, "zz"); err == nil || !strings.Contains(err.Error(), "have: a, b") {
		t.Fatalf("missing context: %v", err)
	}
}
