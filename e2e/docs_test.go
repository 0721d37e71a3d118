package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The shell blocks of README.md and docs/**/*.md say by their info string
// whether the docs test runs them against a local cluster:
//
//   - "sh aegis-run": every command is run, in order, by TestDocsCommands;
//   - "sh aegis-norun": shown, never run. These are the commands that
//     cannot run against the docs' one local cluster: a second cluster or
//     one in network namespaces (root), the cluster's own destroy (the test
//     runs it last), commands that follow until interrupted (logs -f,
//     events), that need a rotation in progress (--resume, --rollback) or a
//     node without etcd data (bootstrap --recover-from), shell set-up
//     (completion), and examples naming nodes or files that are not there.
//
// Blocks with any other info string (make test, make bench, daemons run by
// hand, output shown after a "$ " prompt) are not run either; an unmarked
// block with a line that starts with aegisctl or bin/aegisctl fails
// TestDocsBlocksMarked, so a new command cannot escape the test unnoticed.
// docs/cli is left out: it is cobra's reference of every command, generated
// and checked by cmd/aegisctl's TestCLIDocs.
const (
	docsRun   = "sh aegis-run"
	docsNoRun = "sh aegis-norun"
)

// The docs' cluster: the name and layout of `make run`'s, in a HOME of the
// test's own (so its state folder and client config are the test's), on
// addresses of its own. Commands are rewritten from make run's addresses
// to these.
const (
	docsClusterName = "aegis-local"
	docsCIDR        = "127.9.60.0/24"
	docsAddrPrefix  = "127.9.60."
	makeRunPrefix   = "127.5.0."
)

// docsCommandTimeout bounds one command of the docs.
const docsCommandTimeout = 2 * time.Minute

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file     string // relative to the repository root
	line     int    // of the opening fence
	info     string // the fence's info string
	commands []docCommand
}

// docCommand is one command of a block: a line, or lines joined by a
// trailing backslash; comment and empty lines are none.
type docCommand struct {
	line int
	text string
}

// docFiles returns README.md, then every Markdown file under docs/ but
// docs/cli, in lexical order: the order their commands run in.
func docFiles(t *testing.T) []string {
	t.Helper()

	files := []string{"README.md"}

	var rest []string

	err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		rel, _ := filepath.Rel("..", path)

		if d.IsDir() && rel == filepath.Join("docs", "cli") {
			return filepath.SkipDir
		}

		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rest = append(rest, rel)
		}

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	slices.Sort(rest)

	return append(files, rest...)
}

// docBlocks parses the fenced blocks of file (relative to the repository
// root).
func docBlocks(t *testing.T, file string) []docBlock {
	t.Helper()

	data, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}

	var (
		blocks  []docBlock
		current *docBlock
		pending *docCommand
	)

	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)

		if strings.HasPrefix(trimmed, "```") {
			if current == nil {
				current = &docBlock{file: file, line: n, info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			} else {
				blocks = append(blocks, *current)
				current, pending = nil, nil
			}

			continue
		}

		if current == nil {
			continue
		}

		if pending != nil {
			pending.text += "\n" + text
		} else {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}

			current.commands = append(current.commands, docCommand{line: n, text: text})
			pending = &current.commands[len(current.commands)-1]
		}

		if strings.HasSuffix(text, "\\") {
			continue
		}

		pending = nil
	}

	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	if current != nil {
		t.Fatalf("%s:%d: the block is never closed", file, current.line)
	}

	return blocks
}

// startsAegisctl reports whether a command runs aegisctl, as the docs write it.
func startsAegisctl(cmd string) bool {
	cmd = strings.TrimSpace(cmd)

	return cmd == "aegisctl" || cmd == "bin/aegisctl" ||
		strings.HasPrefix(cmd, "aegisctl ") || strings.HasPrefix(cmd, "bin/aegisctl ")
}

// TestDocsBlocksMarked: every block of the docs with an aegisctl command is
// marked to run or not, with the two markers alone, and a block marked to
// run has commands.
func TestDocsBlocksMarked(t *testing.T) {
	for _, file := range docFiles(t) {
		for _, b := range docBlocks(t, file) {
			switch {
			case b.info == docsRun && len(b.commands) == 0:
				t.Errorf("%s:%d: block marked %q has no command", b.file, b.line, docsRun)
			case b.info == docsRun || b.info == docsNoRun:
			case strings.Contains(b.info, "aegis-"):
				t.Errorf("%s:%d: unknown marker %q: use %q or %q", b.file, b.line, b.info, docsRun, docsNoRun)
			default:
				for _, c := range b.commands {
					if startsAegisctl(c.text) {
						t.Errorf("%s:%d: %q is in a block marked neither %q (run by TestDocsCommands against a local cluster) nor %q",
							b.file, c.line, strings.TrimSpace(c.text), docsRun, docsNoRun)
					}
				}
			}
		}
	}
}

// aegisctlWord is aegisctl at the start of a command of a shell line.
var aegisctlWord = regexp.MustCompile(`(^|[\s;&|(])(?:bin/)?aegisctl(\s|$)`)

// rewriteDocCommand points a command of the docs at the test's binary and
// cluster: aegisctl and bin/aegisctl become the built aegisctl, make run's
// addresses the test's. Nothing else changes.
func rewriteDocCommand(cmd, aegisctl string) string {
	cmd = aegisctlWord.ReplaceAllString(cmd, "${1}"+aegisctl+"${2}")
	// Twice: a match consumes the blank before the next one.
	cmd = aegisctlWord.ReplaceAllString(cmd, "${1}"+aegisctl+"${2}")

	return strings.ReplaceAll(cmd, makeRunPrefix, docsAddrPrefix)
}

// docsShell runs one command of the docs with bash in dir, with the
// environment env, and returns its output.
func docsShell(dir string, env []string, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docsCommandTimeout)
	defer cancel()

	c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	c.Dir, c.Env = dir, env
	out, err := c.CombinedOutput()

	return string(out), err
}

// TestDocsCommands creates one local cluster as `make run` does (process
// runtime, a HOME and addresses of the test's own), runs every command of
// the docs' "sh aegis-run" blocks against it in order, and destroys it with
// the docs' `bin/aegisctl cluster destroy`, whatever happens. A command
// that fails stops the test, naming its file, line and output. See the
// top of this file for what is not run.
func TestDocsCommands(t *testing.T) {
	needBinaries(t)

	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}

	var run []docBlock

	for _, file := range docFiles(t) {
		for _, b := range docBlocks(t, file) {
			if b.info == docsRun {
				run = append(run, b)
			}
		}
	}

	if len(run) == 0 {
		t.Fatalf("no block of the docs is marked %q", docsRun)
	}

	root := testutil.ShortTempDir(t)
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")

	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	aegisctl := filepath.Join(binDir, "aegisctl")
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}

	start := time.Now()

	t.Cleanup(func() { destroyDocsCluster(t, work, env, aegisctl, home) })

	out, err := docsShell(work, env, aegisctl+" cluster create --cidr "+docsCIDR+" --runtime process")
	if err != nil {
		t.Fatalf("cluster create: %v\n%s", err, out)
	}

	created := time.Now()
	commands := 0

	for _, b := range run {
		for _, c := range b.commands {
			cmd := rewriteDocCommand(c.text, aegisctl)

			begin := time.Now()

			out, err := docsShell(work, env, cmd)
			if err != nil {
				t.Fatalf("%s:%d: %s\nran: %s\n%v\n%s", b.file, c.line, strings.TrimSpace(c.text), cmd, err, out)
			}

			commands++

			if d := time.Since(begin); d > 5*time.Second {
				t.Logf("%s:%d took %s", b.file, c.line, d.Round(time.Millisecond))
			}
		}
	}

	t.Logf("%d commands of %d blocks; cluster create %s, the commands %s",
		commands, len(run), created.Sub(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
}

// destroyDocsCluster destroys the docs' cluster with the docs' command, or,
// should that fail, through localcluster, and checks nothing is left.
func destroyDocsCluster(t *testing.T, work string, env []string, aegisctl, home string) {
	state := filepath.Join(home, ".aegis", "clusters")

	c, err := localcluster.Load(state, docsClusterName)
	if err != nil {
		return // never created
	}

	if t.Failed() {
		for _, n := range c.Nodes {
			t.Logf("last lines of %s:\n%s", n.Name, c.Tail(n, 20))
		}
	}

	start := time.Now()

	out, err := docsShell(work, env, rewriteDocCommand("bin/aegisctl cluster destroy", aegisctl))
	t.Logf("cluster destroy %s", time.Since(start).Round(time.Millisecond))

	if err != nil {
		t.Errorf("bin/aegisctl cluster destroy: %v\n%s", err, out)

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	}

	if left := lingering(c.Dir); len(left) > 0 {
		t.Errorf("processes left running: %q", left)
	}
}

// docLink is a Markdown link to a relative path, with an optional anchor.
var docLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchor is the anchor GitHub gives a heading: lower case, spaces
// as dashes, other punctuation dropped.
func headingAnchor(heading string) string {
	var b strings.Builder

	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}

	return b.String()
}

// docAnchors returns the anchors of the headings of a Markdown file.
func docAnchors(t *testing.T, path string) []string {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	var anchors []string

	fenced := false

	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}

		if !fenced && strings.HasPrefix(line, "#") {
			anchors = append(anchors, headingAnchor(strings.TrimLeft(line, "#")))
		}
	}

	return anchors
}

// TestDocsLinks: every relative link of README.md and docs/ (docs/cli
// included) names a file that exists and, with an anchor, a heading of it.
func TestDocsLinks(t *testing.T) {
	files := docFiles(t)

	cli, err := filepath.Glob("../docs/cli/*.md")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range cli {
		rel, _ := filepath.Rel("..", c)
		files = append(files, rel)
	}

	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}

		for n, line := range strings.Split(string(data), "\n") {
			for _, m := range docLink.FindAllStringSubmatch(line, -1) {
				target, anchor, _ := strings.Cut(m[1], "#")
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}

				path := filepath.Join("..", filepath.Dir(file), target)
				if target == "" {
					path = filepath.Join("..", file)
				}

				info, err := os.Stat(path)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", file, n+1, m[1], err)

					continue
				}

				if anchor != "" && !info.IsDir() && !slices.Contains(docAnchors(t, path), anchor) {
					t.Errorf("%s:%d: link %s: no heading of %s has the anchor %q", file, n+1, m[1], target, anchor)
				}
			}
		}
	}
}
