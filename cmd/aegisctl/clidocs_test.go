package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// cliDocsDir is the CLI reference, one Markdown page per command, generated
// from the command tree by TestCLIDocs. The generator lives in this test
// rather than in a hidden aegisctl command or a package of its own: the
// command tree is package main's, so only its tests can walk it without
// shipping a generator (and cobra's doc package) in every aegisctl binary.
const cliDocsDir = "../../docs/cli"

// cliDocsHint says how to bring docs/cli up to date.
const cliDocsHint = "run `make docs` (go test ./cmd/aegisctl -run '^TestCLIDocs$' -update) and commit docs/cli"

// generateCLIDocs writes the reference of aegisctl's commands into dir.
func generateCLIDocs(t *testing.T, dir string) {
	t.Helper()

	if err := doc.GenMarkdownTree(docRoot(t), dir); err != nil {
		t.Fatalf("generating the CLI reference: %v", err)
	}
}

// docRoot is aegisctl's command tree as its generated documents show it:
// completion command included, no machine-dependent defaults, no date.
func docRoot(t *testing.T) *cobra.Command {
	t.Helper()

	// Defaults that depend on the machine (home, the binary's own
	// directory) must not leak into the pages.
	t.Setenv("HOME", "/home/user")
	t.Setenv("AEGISCONFIG", "")
	t.Setenv("TALOSCONFIG", "")

	e := &env{clock: clock.Real(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	root := newRootCommand(e)
	// Execute adds the completion command; the reference documents it too.
	root.InitDefaultCompletionCmd()

	var disable func(*cobra.Command)
	disable = func(c *cobra.Command) {
		// No "Auto generated on DATE" footer: the pages must be the same
		// every time they are generated.
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			disable(sub)
		}
	}
	disable(root)

	return root
}

// markdownFiles returns the names of the .md files in dir.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()

	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}

	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}

	slices.Sort(names)

	return names
}

// TestCLIDocs: docs/cli is what cobra's doc package makes of the command
// tree now. With -update (`make docs`) it rewrites docs/cli instead, removing
// the pages of commands that are gone.
func TestCLIDocs(t *testing.T) {
	fresh := t.TempDir()
	generateCLIDocs(t, fresh)

	if golden.Update() {
		updateCLIDocs(t, fresh)
	}

	want := markdownFiles(t, fresh)
	have := markdownFiles(t, cliDocsDir)

	for _, name := range want {
		got, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatal(err)
		}

		committed, err := os.ReadFile(filepath.Join(cliDocsDir, name))

		switch {
		case os.IsNotExist(err):
			t.Errorf("docs/cli/%s is missing: %s", name, cliDocsHint)
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(got, committed):
			t.Errorf("docs/cli/%s is stale: %s", name, cliDocsHint)
		}
	}

	for _, name := range have {
		if !slices.Contains(want, name) {
			t.Errorf("docs/cli/%s documents no command: %s", name, cliDocsHint)
		}
	}
}

// updateCLIDocs replaces the pages of docs/cli with those in fresh.
func updateCLIDocs(t *testing.T, fresh string) {
	t.Helper()

	if err := os.MkdirAll(cliDocsDir, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, name := range markdownFiles(t, cliDocsDir) {
		if err := os.Remove(filepath.Join(cliDocsDir, name)); err != nil {
			t.Fatal(err)
		}
	}

	for _, name := range markdownFiles(t, fresh) {
		data, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatal(err)
		}

		golden.Write(t, filepath.Join(cliDocsDir, name), data)
	}
}

// TestCLIDocsNameEveryCommand: every command a user can run has its page,
// so a link from the guide to docs/cli/aegisctl_<command>.md finds it.
func TestCLIDocsNameEveryCommand(t *testing.T) {
	dir := t.TempDir()
	generateCLIDocs(t, dir)

	pages := markdownFiles(t, dir)

	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}

		page := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		if !slices.Contains(pages, page) {
			t.Errorf("%q has no page %s", c.CommandPath(), page)
		}

		for _, sub := range c.Commands() {
			walk(sub)
		}
	}

	e := &env{clock: clock.Real(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	walk(newRootCommand(e))
}
