package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aegis-os/aegis/internal/atomicfile"
)

// writeTarball writes every package's files into one tar.gz in out, under
// aegis-VERSION-linux-ARCH/ with the packages' layout (usr/bin, etc, …):
// for machines without dpkg, unpacked over / or anywhere else. Config
// files and maintainer scripts are the packages' business: the tarball
// only holds the files.
func writeTarball(pkgs []pkg, in inputs, out string) (string, error) {
	top := fmt.Sprintf("aegis-%s-linux-%s", in.version, in.arch)

	var all []entry
	for _, p := range pkgs {
		all = append(all, p.entries...)
	}

	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.dst, b.dst) })

	var buf bytes.Buffer

	// gzip's default level: the best one takes twice as long on the
	// binaries for a few percent.
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{}

	for _, e := range all {
		if err := addParents(tw, dirs, top, path.Dir(e.dst), in); err != nil {
			return "", err
		}

		if err := addEntry(tw, dirs, top, e, in); err != nil {
			return "", err
		}
	}

	if err := tw.Close(); err != nil {
		return "", err
	}

	if err := zw.Close(); err != nil {
		return "", err
	}

	dst := filepath.Join(out, top+".tar.gz")

	return dst, atomicfile.Write(dst, buf.Bytes(), 0o644, atomicfile.Options{Overwrite: true, DirPerm: 0o755})
}

// addParents adds the directories above dir that are not in yet, 0755.
func addParents(tw *tar.Writer, dirs map[string]bool, top, dir string, in inputs) error {
	if dir == "/" || dirs[dir] {
		return nil
	}

	if err := addParents(tw, dirs, top, path.Dir(dir), in); err != nil {
		return err
	}

	return addEntry(tw, dirs, top, entry{dst: dir, mode: 0o755, dir: true}, in)
}

// addEntry adds e, owned by root, at the release's time.
func addEntry(tw *tar.Writer, dirs map[string]bool, top string, e entry, in inputs) error {
	h := &tar.Header{Name: path.Join(top, e.dst), Mode: int64(e.mode.Perm()), ModTime: in.mtime, Uname: "root", Gname: "root", Format: tar.FormatPAX}

	if e.dir {
		if dirs[e.dst] {
			return nil
		}

		dirs[e.dst] = true
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"

		return tw.WriteHeader(h)
	}

	data, err := os.ReadFile(e.src)
	if err != nil {
		return err
	}

	h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}

	_, err = tw.Write(data)

	return err
}
