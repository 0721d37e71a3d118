// Command aegis-image writes the OCI image archives of the system services
// (apid, trustd, etcd) from their binaries:
//
//	aegis-image --bin-dir DIR --out DIR
//
// Each archive is written to a temporary file and renamed into place, so a
// reader never sees half of one. The same binaries give the same archives.
// A binary that cannot run in the image (not a static Linux executable of
// the machine's architecture) is refused, with how to build it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "aegis-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("aegis-image", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "`DIR` holding the apid, trustd and etcd binaries")
	out := fs.String("out", "", "`DIR` the archives are written to")
	var common daemonflag.Flags
	common.Register(fs)

	if err := fs.Parse(args); err != nil {
		return err
	}

	if common.Version {
		daemonflag.PrintVersion(os.Stdout, "aegis-image")

		return nil
	}

	if *binDir == "" || *out == "" {
		return errors.New("--bin-dir and --out are required")
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}

	for _, svc := range ociimage.Services() {
		d, err := writeArchive(filepath.Join(*binDir, svc.ID), ociimage.ArchivePath(*out, svc.ID), svc)
		if err != nil {
			return err
		}

		fmt.Printf("%s %s %s\n", ociimage.ArchivePath(*out, svc.ID), ociimage.ImageName(svc.ID), d)
	}

	return nil
}

func writeArchive(binary, path string, svc ociimage.Service) (string, error) {
	var buf bytes.Buffer

	d, err := ociimage.Write(&buf, ociimage.Spec{Name: ociimage.ImageName(svc.ID), Binary: binary, User: svc.User})
	if err != nil {
		return "", err
	}

	if err := atomicfile.Write(path, buf.Bytes(), 0o644, atomicfile.Options{Overwrite: true, DirPerm: 0o755}); err != nil {
		return "", err
	}

	return d.String(), nil
}
