package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBin is a bin/ of `make build` in miniature: each binary a shell
// script (aegisctl's prints a completion script), each image a few bytes.
// The packages only carry them; a release packs the real ones.
func fakeBin(t *testing.T) string {
	t.Helper()

	dir := t.TempDir()
	for _, b := range append([]string{"aegisctl"}, nodeBinaries...) {
		script := "#!/bin/sh\necho \"# " + b + " $*\"\n"
		if err := os.WriteFile(filepath.Join(dir, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	for _, img := range images {
		if err := writeFile(filepath.Join(dir, "images", img+".tar"), []byte("image "+img)); err != nil {
			t.Fatal(err)
		}
	}

	return dir
}

// TestInstallIntoCleanRoot: the packages unpack into a root that holds
// nothing else and machined.service passes systemd-analyze verify there.
func TestInstallIntoCleanRoot(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh release installs it); make release runs this check and fails without it", tool)
		}
	}

	out := t.TempDir()

	b, err := build(testInputs(fakeBin(t)), out)
	if err != nil {
		t.Fatal(err)
	}

	if len(b.debs) != 2 || !strings.HasSuffix(b.debs[1], "aegis-node_1.2.3~rc.1+g0123abc_amd64.deb") {
		t.Fatalf("packages %q", b.debs)
	}

	if err := verify(b.debs, out); err != nil {
		t.Fatal(err)
	}

	// The check is not vacuous: a unit whose binary is not installed
	// fails it.
	broken := filepath.Join(out, "broken.deb")
	p := pkg{name: nodePackage, entries: []entry{{src: writeUnitStage(t), dst: unitPath("machined.service"), mode: 0o644}}}

	if path, err := writeDeb(p, testInputs(""), out); err != nil {
		t.Fatal(err)
	} else if err := os.Rename(path, broken); err != nil {
		t.Fatal(err)
	}

	if err := verify([]string{broken}, out); err == nil || !strings.Contains(err.Error(), "/usr/bin/machined") {
		t.Fatalf("verify of a unit without its binary: %v", err)
	}
}

// writeUnitStage is machined.service alone, as a file.
func writeUnitStage(t *testing.T) string {
	t.Helper()

	unit, err := dist.ReadFile("dist/machined.service")
	if err != nil {
		t.Fatal(err)
	}

	p := filepath.Join(t.TempDir(), "machined.service")
	if err := writeFile(p, unit); err != nil {
		t.Fatal(err)
	}

	return p
}

// TestTarball: the tarball holds every file of both packages under one
// top folder, with their modes, and the man pages stamped.
func TestTarball(t *testing.T) {
	in := testInputs(fakeBin(t))
	out := t.TempDir()

	b, err := build(in, out)
	if err != nil {
		t.Fatal(err)
	}

	top := "aegis-" + in.version + "-linux-amd64"
	if filepath.Base(b.tarball) != top+".tar.gz" {
		t.Fatalf("tarball %s", b.tarball)
	}

	got := readTarball(t, b.tarball)

	pkgs, err := packages(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range pkgs {
		for _, e := range p.entries {
			h, ok := got[path.Join(top, e.dst)]
			if !ok {
				t.Errorf("%s (%s) is not in the tarball", e.dst, p.name)

				continue
			}

			if os.FileMode(h.Mode) != e.mode {
				t.Errorf("%s: mode %o, want %o", e.dst, h.Mode, e.mode)
			}
		}
	}

	if !slices.ContainsFunc(b.debs, func(d string) bool { return strings.Contains(d, "aegisctl_") }) {
		t.Errorf("no aegisctl package in %q", b.debs)
	}
}

// TestManPagesStamped: a packaged page carries the release's version and
// month instead of the committed 1970.
func TestManPagesStamped(t *testing.T) {
	s := stager{in: testInputs(""), dir: t.TempDir()}

	pages, err := s.manPages(func(name string) bool { return name == "machined.8" })
	if err != nil || len(pages) != 1 {
		t.Fatalf("pages %v, %v", pages, err)
	}

	f, err := os.Open(pages[0].src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}

	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}

	if want := `.TH "MACHINED" "8" "Nov 2026" "Aegis v1.2.3-rc.1+g0123abc" "Aegis Manual"`; !strings.Contains(string(page), want) {
		t.Fatalf("page does not start with %s:\n%.200s", want, page)
	}
}

func readTarball(t *testing.T, p string) map[string]*tar.Header {
	t.Helper()

	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}

	got := map[string]*tar.Header{}
	tr := tar.NewReader(zr)

	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got
		}

		if err != nil {
			t.Fatal(err)
		}

		got[strings.TrimSuffix(h.Name, "/")] = h
	}
}
