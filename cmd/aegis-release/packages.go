package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// inputs are what a release is made from.
type inputs struct {
	// binDir holds the binaries and images/ of `make build`.
	binDir string
	// manDir holds the man pages and bash completions of `make docs`.
	manDir string
	// docRoot is the source tree: README.md, LICENSE, docs/guide.
	docRoot string
	// version is Aegis's semver version, stamped on packages and pages.
	version string
	// arch is the Go architecture of the binaries.
	arch string
	// maintainer is the packages' Maintainer field.
	maintainer string
	// mtime is the time of every file in the packages.
	mtime time.Time
}

// entry is one file, directory or config file of a package: src on the
// build machine (empty for a directory), dst on the installed system.
type entry struct {
	src, dst string
	mode     fs.FileMode
	// config marks a file the operator may edit: dpkg keeps their edits.
	config bool
	dir    bool
}

// pkg is one package: its name, what it says of itself and its files.
type pkg struct {
	name, description string
	recommends        []string
	suggests          []string
	// postinst and prerm are maintainer scripts, paths on the build
	// machine; empty for none.
	postinst, prerm string
	entries         []entry
}

// packages are the release's packages, their files staged under stage.
func packages(in inputs, stage string) ([]pkg, error) {
	s := stager{in: in, dir: stage}

	client, err := s.client()
	if err != nil {
		return nil, err
	}

	node, err := s.node()
	if err != nil {
		return nil, err
	}

	return []pkg{client, node}, nil
}

// stager writes the generated files of the packages under dir.
type stager struct {
	in  inputs
	dir string
}

func (s stager) client() (pkg, error) {
	p := pkg{
		name: clientPackage,
		description: "Aegis command-line client (aegisctl)\n" +
			"Generates secrets and configs, creates local clusters and drives Aegis\n" +
			"nodes over the Talos API, with man pages and shell completions.",
		suggests: []string{nodePackage},
	}
	p.entries = append(p.entries, s.binary("aegisctl"))

	pages, err := s.manPages(func(name string) bool { return strings.HasPrefix(name, "aegisctl") && strings.HasSuffix(name, ".1") })
	if err != nil {
		return p, err
	}

	completions, err := s.aegisctlCompletions()
	if err != nil {
		return p, err
	}

	p.entries = append(append(p.entries, pages...), completions...)
	p.entries = append(p.entries, s.docs(clientPackage, false)...)

	return p, nil
}

func (s stager) node() (pkg, error) {
	p := pkg{
		name: nodePackage,
		description: "Aegis node: machined with apid, trustd and etcd\n" +
			"machined runs a node's boot sequence and services: apid (the node's API),\n" +
			"trustd (certificates for bootstrap tokens) and etcd on control planes,\n" +
			"from the image archives in /usr/lib/aegis/images; machined.service runs it\n" +
			"with the config /etc/aegis/machine.yaml.",
		// The containerd runtime (a config's default) runs the
		// services with the host's containerd and runc binaries;
		// chrony is the usual NTP server of the time gate.
		recommends: []string{"containerd", "runc"},
		suggests:   []string{clientPackage, "chrony"},
		postinst:   filepath.Join(s.dir, "dist", "postinst"),
		prerm:      filepath.Join(s.dir, "dist", "prerm"),
	}

	system, err := s.nodeSystem()
	if err != nil {
		return p, err
	}

	p.entries = system

	pages, err := s.manPages(func(name string) bool { return slices.Contains(daemons, strings.TrimSuffix(name, ".8")) })
	if err != nil {
		return p, err
	}

	p.entries = append(p.entries, pages...)

	for _, d := range daemons {
		p.entries = append(p.entries, entry{src: filepath.Join(s.in.manDir, "bash", d), dst: path.Join(bashDir, d), mode: 0o644})
	}

	p.entries = append(p.entries, s.docs(nodePackage, true)...)

	return p, nil
}

// nodeSystem are the node package's binaries, images, unit, environment
// file and config folder.
func (s stager) nodeSystem() ([]entry, error) {
	var out []entry

	for _, b := range nodeBinaries {
		out = append(out, s.binary(b))
	}

	for _, img := range images {
		out = append(out, entry{src: filepath.Join(s.in.binDir, "images", img+".tar"), dst: path.Join(imageDir, img+".tar"), mode: 0o644})
	}

	if err := s.writeDist(); err != nil {
		return nil, err
	}

	for _, u := range units {
		out = append(out, entry{src: filepath.Join(s.dir, "dist", u), dst: unitPath(u), mode: 0o644})
	}

	return append(out,
		entry{src: filepath.Join(s.dir, "dist", "machined.default"), dst: defaultsFile, mode: 0o644, config: true},
		// The machine config holds the node's keys (a control plane's
		// CA key among them): root's alone.
		entry{dst: configDir, mode: 0o700, dir: true},
	), nil
}

func (s stager) binary(name string) entry {
	return entry{src: filepath.Join(s.in.binDir, name), dst: path.Join(binDir, name), mode: 0o755}
}

// writeDist writes the embedded files of dist under the stage.
func (s stager) writeDist() error {
	return fs.WalkDir(dist, "dist", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}

		data, err := dist.ReadFile(name)
		if err != nil {
			return err
		}

		dst := filepath.Join(s.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}

		return os.WriteFile(dst, data, 0o644)
	})
}

// docs are a package's documents: the license as Debian's copyright
// file, the README and, with guide, the operator's guide.
func (s stager) docs(name string, guide bool) []entry {
	dir := path.Join(docDir, name)
	out := []entry{
		{src: filepath.Join(s.in.docRoot, "LICENSE"), dst: path.Join(dir, "copyright"), mode: 0o644},
		{src: filepath.Join(s.in.docRoot, "README.md"), dst: path.Join(dir, "README.md"), mode: 0o644},
	}

	if !guide {
		return out
	}

	pages, _ := filepath.Glob(filepath.Join(s.in.docRoot, "docs", "guide", "*.md"))
	for _, p := range pages {
		out = append(out, entry{src: p, dst: path.Join(dir, "guide", filepath.Base(p)), mode: 0o644})
	}

	return out
}

// missing names the entries whose source files do not exist, with what
// makes them.
func missing(pkgs []pkg) error {
	var gone []string

	for _, p := range pkgs {
		for _, e := range p.entries {
			if e.dir {
				continue
			}

			if _, err := os.Stat(e.src); err != nil {
				gone = append(gone, e.src)
			}
		}
	}

	if len(gone) == 0 {
		return nil
	}

	return fmt.Errorf("missing %s: run `make build` (binaries, images) and `make docs` (man pages) first", strings.Join(gone, ", "))
}
