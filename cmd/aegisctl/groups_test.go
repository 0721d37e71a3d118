package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
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
