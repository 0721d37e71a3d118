// Package manpage makes the man pages and shell completions that Aegis's
// packages install from the command lines themselves: cobra's doc package
// for aegisctl's command tree, and a cobra command built from a daemon's
// flag.FlagSet for machined, apid and trustd. Only tests import it (each
// binary's TestManPages, rewritten with -update by `make docs`), so no
// binary links cobra's doc package, and a daemon's flags stay the
// standard library's.
package manpage

import (
	"bytes"
	"flag"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// Dir is where the generated pages and completions are committed,
// relative to a cmd/NAME package: docs/man, which the release packages
// copy from.
const Dir = "../../docs/man"

// Hint says how to bring docs/man up to date.
const Hint = "run `make docs` and commit docs/man"

// Daemon is a command that describes a daemon's command line, for its man
// page and bash completion only: it runs nothing. Long is the package doc
// of the daemon's main.go in dir, as Markdown; a flag whose value is
// named FILE or DIR (the `FILE` of its usage) completes file or directory
// names.
func Daemon(t testing.TB, name, short, dir string, fs *flag.FlagSet) *cobra.Command {
	t.Helper()

	c := &cobra.Command{
		Use:               name + " [flags]",
		Short:             short,
		Long:              packageDoc(t, filepath.Join(dir, "main.go")),
		DisableAutoGenTag: true,
		Run:               func(*cobra.Command, []string) {},
	}
	c.Flags().AddGoFlagSet(fs)
	c.Flags().VisitAll(func(f *pflag.Flag) {
		switch value, _ := pflag.UnquoteUsage(f); {
		case strings.HasSuffix(value, "FILE"):
			_ = c.MarkFlagFilename(f.Name)
		case strings.HasPrefix(value, "DIR"):
			_ = c.MarkFlagDirname(f.Name)
		}
	})

	return c
}

// packageDoc is the package comment of the Go file at path, in Markdown.
func packageDoc(t testing.TB, path string) string {
	t.Helper()

	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || f.Doc == nil {
		t.Fatalf("reading the package doc of %s: %v", path, err)
	}

	var p comment.Parser

	return string((&comment.Printer{}).Markdown(p.Parse(f.Doc.Text())))
}

// Write writes the man pages of c and its subcommands in section into dir,
// and, with a non-empty bash, c's bash completion into dir/bash. The
// pages are dated 1 January 1970: the release stamps its own date and
// version when it packages them, so the committed pages change only with
// the commands.
func Write(t testing.TB, c *cobra.Command, section, dir string, bash string) {
	t.Helper()

	t.Setenv("SOURCE_DATE_EPOCH", "0")

	header := &doc.GenManHeader{Section: section, Source: "Aegis", Manual: "Aegis Manual"}
	if err := doc.GenManTree(c, header, dir); err != nil {
		t.Fatalf("generating the man pages of %s: %v", c.Name(), err)
	}

	if bash == "" {
		return
	}

	var buf bytes.Buffer
	if err := c.GenBashCompletion(&buf); err != nil {
		t.Fatalf("generating the bash completion of %s: %v", c.Name(), err)
	}

	golden.Write(t, filepath.Join(dir, "bash", bash), buf.Bytes())
}

// Check fails the test unless the files of fresh are those under Dir
// that mine claims (by their path relative to Dir); with -update it
// rewrites them first, removing the claimed ones that are gone.
func Check(t testing.TB, fresh string, mine func(rel string) bool) {
	t.Helper()

	want := files(t, fresh, func(string) bool { return true })

	if golden.Update() {
		for _, rel := range files(t, Dir, mine) {
			if err := os.Remove(filepath.Join(Dir, rel)); err != nil {
				t.Fatal(err)
			}
		}

		for _, rel := range want {
			golden.Write(t, filepath.Join(Dir, rel), read(t, filepath.Join(fresh, rel)))
		}
	}

	have := files(t, Dir, mine)

	for _, rel := range want {
		committed, err := os.ReadFile(filepath.Join(Dir, rel))

		switch {
		case os.IsNotExist(err):
			t.Errorf("docs/man/%s is missing: %s", rel, Hint)
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(read(t, filepath.Join(fresh, rel)), committed):
			t.Errorf("docs/man/%s is stale: %s", rel, Hint)
		}
	}

	for _, rel := range have {
		if !slices.Contains(want, rel) {
			t.Errorf("docs/man/%s documents no command: %s", rel, Hint)
		}
	}
}

// files are the paths of the files under root, relative to it, that keep
// accepts.
func files(t testing.TB, root string, keep func(rel string) bool) []string {
	t.Helper()

	var out []string

	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}

		rel, err := filepath.Rel(root, path)
		if err == nil && keep(filepath.ToSlash(rel)) {
			out = append(out, filepath.ToSlash(rel))
		}

		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}

	slices.Sort(out)

	return out
}

func read(t testing.TB, path string) []byte {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	return data
}
