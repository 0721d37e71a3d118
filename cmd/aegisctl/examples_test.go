package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/internal/clock"
)

// exampleExceptions are runnable commands allowed to lack an Example, each
// with the reason.
var exampleExceptions = map[string]string{}

// TestEveryCommandHasExamples walks the command tree and fails for a
// runnable leaf command that shows no Example in its help: an operator reads
// 'aegisctl CMD --help' for a command line to start from.
func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCommand(&env{clock: clock.Real(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})

	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}

		if !c.Runnable() || c.HasSubCommands() || c.Hidden || c == root {
			return
		}

		if _, ok := exampleExceptions[c.CommandPath()]; ok {
			return
		}

		if c.Example == "" {
			t.Errorf("%q has no Example: add command lines an operator can run", c.CommandPath())
		}
	}
	walk(root)

	for path := range exampleExceptions {
		if c, _, err := root.Find(splitPath(path)[1:]); err != nil || c.CommandPath() != path {
			t.Errorf("exception %q names no command: remove it", path)
		}
	}
}

// splitPath splits a command path into its words.
func splitPath(p string) []string {
	return strings.Fields(p)
}
