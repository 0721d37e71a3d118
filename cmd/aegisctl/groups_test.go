package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
)

// TestUnknownSubcommandRefused: a mistyped or unknown subcommand of any
// group is an error naming it, with a suggestion where one is close, and
// nothing runs; a group alone prints its help.
func TestUnknownSubcommandRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"token", "revok", "4dxzvu"}, []string{`unknown command "revok" for "aegisctl token"`, "Did you mean this?\n\trevoke"}},
		{[]string{"etcd", "alarm", "lst"}, []string{`unknown command "lst" for "aegisctl etcd alarm"`, "\tlist"}},
		{[]string{"cluster", "nothing-like-it"}, []string{`unknown command "nothing-like-it" for "aegisctl cluster"`, "aegisctl cluster --help"}},
		{[]string{"tokn"}, []string{`unknown command "tokn" for "aegisctl"`}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := run(t, t.TempDir(), tt.args...)
			if err == nil {
				t.Fatalf("accepted, printing:\n%s", out)
			}

			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	out, err := run(t, t.TempDir(), "token")
	if err != nil || !strings.Contains(out, "Available Commands:") {
		t.Fatalf("aegisctl token: %v\n%s", err, out)
	}
}

// TestEveryCommandChecksItsArguments: every command that runs declares
// which arguments it takes, so an extra one is refused rather than
// ignored (cobra's default for a command without Args accepts any).
func TestEveryCommandChecksItsArguments(t *testing.T) {
	var walk func(c *cobra.Command)

	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Args == nil && c.HasParent() {
			t.Errorf("%s takes any argument: give it Args", c.CommandPath())
		}

		for _, sub := range c.Commands() {
			walk(sub)
		}
	}

	walk(newRootCommand(newEnv()))
}

// TestNoCurrentContextSaysWhatToDo: a node command with a client config
// whose cluster was destroyed, or without a current context, says how to
// go on.
func TestNoCurrentContextSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()

	for _, tt := range []struct {
		name string
		cfg  *certs.ClientConfig
		want string
	}{
		{"no contexts", &certs.ClientConfig{}, "create a cluster with 'aegisctl cluster create'"},
		{"none current", &certs.ClientConfig{Contexts: map[string]*certs.ClientContext{"a": {Endpoints: []string{"10.0.0.1"}}}},
			"pick one with 'aegisctl config context NAME' (have: a)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := tt.cfg.Save(path); err != nil {
				t.Fatal(err)
			}

			if _, err := run(t, dir, "--aegisconfig", path, "services"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("services: %v, want %q", err, tt.want)
			}
		})
	}
}
