package main

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/version"
)

// writeBundle writes the release bundle a node upgrades from
// (MachineService.Upgrade) into out as aegis-VERSION-linux-ARCH.bundle:
// machined, apid, trustd, etcd and their image archives, with the manifest
// of internal/bundle. The commit is this build's own: aegis-release is
// built from the same tree as the binaries it packs.
func writeBundle(in inputs, out string) (string, error) {
	var buf bytes.Buffer

	src := bundle.Source{BinDir: in.binDir, Version: in.version, Commit: version.Get().Commit, MTime: in.mtime}
	if _, err := bundle.Write(&buf, src); err != nil {
		return "", err
	}

	path := filepath.Join(out, fmt.Sprintf("aegis-%s-linux-%s.bundle", in.version, in.arch))

	return path, atomicfile.Write(path, buf.Bytes(), 0o644, atomicfile.Options{Overwrite: true})
}
