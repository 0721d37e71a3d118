package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"

	"github.com/aegis-os/aegis/internal/atomicfile"
)

// built are the files a release wrote.
type built struct {
	debs    []string
	tarball string
	bundle  string
}

func (b built) files() []string {
	return append(append([]string(nil), b.debs...), b.tarball, b.bundle)
}

// build stages the generated files, then writes the Debian packages and
// the tarball into out.
func build(in inputs, out string) (built, error) {
	stage := filepath.Join(out, ".stage")
	if err := os.RemoveAll(stage); err != nil {
		return built{}, err
	}
	defer os.RemoveAll(stage) //nolint:errcheck // a leftover is removed by the next run

	pkgs, err := packages(in, stage)
	if err != nil {
		return built{}, err
	}

	if err := missing(pkgs); err != nil {
		return built{}, err
	}

	var b built

	for _, p := range pkgs {
		path, err := writeDeb(p, in, out)
		if err != nil {
			return b, fmt.Errorf("package %s: %w", p.name, err)
		}

		b.debs = append(b.debs, path)
	}

	if b.tarball, err = writeTarball(pkgs, in, out); err != nil {
		return b, fmt.Errorf("tarball: %w", err)
	}

	if b.bundle, err = writeBundle(in, out); err != nil {
		return b, fmt.Errorf("bundle: %w", err)
	}

	return b, nil
}

// info is p as nfpm describes a package.
func info(p pkg, in inputs) *nfpm.Info {
	i := &nfpm.Info{
		Name:        p.name,
		Arch:        in.arch,
		Platform:    "linux",
		Version:     in.version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  in.maintainer,
		Description: p.description,
		Vendor:      "Aegis",
		Homepage:    "https://github.com/aegis-os/aegis",
		License:     "Apache-2.0",
		MTime:       in.mtime,
		Overridables: nfpm.Overridables{
			Recommends: p.recommends,
			Suggests:   p.suggests,
			Scripts:    nfpm.Scripts{PostInstall: p.postinst, PreRemove: p.prerm},
			Deb:        nfpm.Deb{Compression: "gzip"},
		},
	}

	for _, e := range p.entries {
		c := &files.Content{Source: e.src, Destination: e.dst, FileInfo: &files.ContentFileInfo{Mode: e.mode, MTime: in.mtime}}

		switch {
		case e.dir:
			c.Type, c.Source = files.TypeDir, ""
		case e.config:
			c.Type = files.TypeConfigNoReplace
		}

		i.Contents = append(i.Contents, c)
	}

	return nfpm.WithDefaults(i)
}

// writeDeb writes p's Debian package into out, under Debian's file name.
func writeDeb(p pkg, in inputs, out string) (string, error) {
	i := info(p, in)
	if err := nfpm.PrepareForPackager(i, "deb"); err != nil {
		return "", err
	}

	var buf bytes.Buffer
	if err := deb.Default.Package(i, &buf); err != nil {
		return "", err
	}

	path := filepath.Join(out, deb.Default.ConventionalFileName(i))

	return path, atomicfile.Write(path, buf.Bytes(), 0o644, atomicfile.Options{Overwrite: true, DirPerm: 0o755})
}
