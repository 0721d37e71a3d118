package main

import (
	"bufio"
	"bytes"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testInputs are the real man pages and documents of the tree, with
// binaries from bin (which the content tests never read).
func testInputs(bin string) inputs {
	return inputs{
		binDir: bin, manDir: "../../docs/man", docRoot: "../..", version: "v1.2.3-rc.1+g0123abc",
		arch: "amd64", maintainer: "Aegis maintainers", mtime: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
	}
}

// manRef is a Documentation=man:NAME(SECTION) reference.
var manRef = regexp.MustCompile(`^man:([a-z0-9_.-]+)\(([1-8])\)$`)

// unitReferences are the installed paths a unit names: its ExecStart
// binary, environment files, Documentation= man pages and files, and the
// directories of the paths its conditions wait for (the operator writes
// the config; the package provides where it goes).
func unitReferences(t *testing.T, unit []byte) []string {
	t.Helper()

	var refs []string

	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}

		switch key {
		case "ExecStart", "ExecStartPre", "ExecStop", "ExecReload":
			refs = append(refs, strings.TrimLeft(strings.Fields(value)[0], "-@:+!"))
		case "EnvironmentFile":
			refs = append(refs, strings.TrimPrefix(value, "-"))
		case "ConditionPathExists", "AssertPathExists":
			refs = append(refs, path.Dir(strings.TrimPrefix(value, "!")))
		case "Documentation":
			for _, d := range strings.Fields(value) {
				switch m := manRef.FindStringSubmatch(d); {
				case m != nil:
					refs = append(refs, path.Join(manDir, "man"+m[2], m[1]+"."+m[2]+".gz"))
				case strings.HasPrefix(d, "file:"):
					refs = append(refs, strings.TrimPrefix(d, "file:"))
				default:
					t.Errorf("Documentation %q: neither man: nor file:", d)
				}
			}
		}
	}

	return refs
}

// TestUnitFilesPackaged: every file a unit of the node package references
// is in that package's nfpm contents, so an installed unit never points
// at nothing.
func TestUnitFilesPackaged(t *testing.T) {
	s := stager{in: testInputs("/nonexistent/bin"), dir: t.TempDir()}

	node, err := s.node()
	if err != nil {
		t.Fatal(err)
	}

	var installed []string
	for _, c := range info(node, s.in).Contents {
		installed = append(installed, c.Destination)
	}

	for _, u := range units {
		if !slices.Contains(installed, unitPath(u)) {
			t.Fatalf("%s is not in %s", u, nodePackage)
		}

		unit, err := dist.ReadFile("dist/" + u)
		if err != nil {
			t.Fatal(err)
		}

		refs := unitReferences(t, unit)
		if len(refs) < 5 {
			t.Fatalf("%s references only %q", u, refs)
		}

		for _, ref := range refs {
			if !slices.Contains(installed, ref) {
				t.Errorf("%s references %s, which %s does not install", u, ref, nodePackage)
			}
		}
	}
}

// TestNodePackageModes: the config directory is root's alone, binaries
// are executable, the defaults file survives an upgrade with the
// operator's edits.
func TestNodePackageModes(t *testing.T) {
	s := stager{in: testInputs("/nonexistent/bin"), dir: t.TempDir()}

	node, err := s.node()
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]func(entry) bool{
		configDir:                                func(e entry) bool { return e.dir && e.mode == 0o700 },
		defaultsFile:                             func(e entry) bool { return e.config && e.mode == 0o644 },
		path.Join(binDir, "machined"):            func(e entry) bool { return e.mode == 0o755 },
		path.Join(imageDir, "etcd.tar"):          func(e entry) bool { return e.mode == 0o644 },
		path.Join(manDir, "man8", "trustd.8.gz"): func(e entry) bool { return e.mode == 0o644 },
		path.Join(bashDir, "apid"):               func(e entry) bool { return e.mode == 0o644 },
	}

	for _, e := range node.entries {
		if ok, found := want[e.dst]; found {
			if !ok(e) {
				t.Errorf("%s: %+v", e.dst, e)
			}

			delete(want, e.dst)
		}
	}

	for dst := range want {
		t.Errorf("%s is not in %s", dst, nodePackage)
	}
}
