// Command aegis-release builds what operators install Aegis from, into one
// folder: Debian packages (aegisctl, for a workstation; aegis-node, for a
// node: machined, apid, trustd, etcd, the service image archives, the
// systemd unit of machined) built with nfpm, a tarball holding both
// packages' files in the same layout, and the release bundle a node
// upgrades from (internal/bundle: the node's binaries and images with a
// manifest of their digests).
//
//	aegis-release --bin-dir bin --man-dir docs/man --version VERSION --out _out/release [--verify]
//
// --bin-dir holds what `make build` made (the binaries and images/); the
// man pages and the daemons' bash completions come from --man-dir, which
// `make docs` generates from the commands, and are stamped with the
// version and date; aegisctl's completions are asked of the aegisctl in
// --bin-dir. --verify then installs the packages into a clean root and
// runs `systemd-analyze verify` on their units: without dpkg-deb or
// systemd-analyze it fails, it never skips. The files' times are
// SOURCE_DATE_EPOCH, or the last commit's time (--mtime), so that the
// same inputs give the same packages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// options are aegis-release's command line.
type options struct {
	binDir, manDir, docRoot, out string
	version, arch, maintainer    string
	mtime                        int64
	verify                       bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "aegis-release:", err)
		}

		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options

	fs := flag.NewFlagSet("aegis-release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binDir, "bin-dir", "bin", "`DIR` of the built binaries and images/ (make build)")
	fs.StringVar(&o.manDir, "man-dir", "docs/man", "`DIR` of the generated man pages and bash completions (make docs)")
	fs.StringVar(&o.docRoot, "doc-root", ".", "`DIR` of the source tree: README.md, LICENSE, docs/guide")
	fs.StringVar(&o.out, "out", "_out/release", "`DIR` the packages and the tarball are written to")
	fs.StringVar(&o.version, "version", "", "Aegis's `VERSION`, semver (scripts/version.sh)")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "Go `ARCH`itecture of the binaries")
	fs.StringVar(&o.maintainer, "maintainer", "Aegis maintainers", "`NAME <EMAIL>` of the packages' Maintainer field")
	fs.Int64Var(&o.mtime, "mtime", 0, "time of every packaged file, in `SECONDS` since 1970 (default: SOURCE_DATE_EPOCH)")
	fs.BoolVar(&o.verify, "verify", false, "install the packages into a clean root and verify their systemd units (needs dpkg-deb and systemd-analyze)")

	if err := fs.Parse(args); err != nil {
		return o, err
	}

	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.version == "":
		return o, errors.New("--version is required (make release passes scripts/version.sh's)")
	}

	if o.mtime == 0 {
		if _, err := fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &o.mtime); err != nil {
			return o, errors.New("give --mtime or SOURCE_DATE_EPOCH (make release passes the last commit's time)")
		}
	}

	return o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	in := inputs{binDir: o.binDir, manDir: o.manDir, docRoot: o.docRoot, version: o.version, arch: o.arch, maintainer: o.maintainer, mtime: time.Unix(o.mtime, 0).UTC()}

	built, err := build(in, o.out)
	if err != nil {
		return err
	}

	for _, path := range built.files() {
		fmt.Fprintln(stdout, path)
	}

	if !o.verify {
		return nil
	}

	if err := verify(built.debs, o.out); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "installed %d packages into a clean root; systemd-analyze verify passed: %v\n", len(built.debs), unitNames())

	return nil
}
