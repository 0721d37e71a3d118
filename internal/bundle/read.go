package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/version"
)

// Options are Extract's checks beyond the bundle's own consistency.
type Options struct {
	// Running is the version of the node the bundle is for; the bundle's
	// version must be an upgrade from it (version.CheckUpgrade). Empty
	// skips the check (tools that only inspect a bundle).
	Running string
}

// Extract reads the bundle r into dir, which must not exist, and returns
// its manifest once every file is in place and matches it. On any refusal
// dir is removed: nothing of a bad bundle is left behind.
func Extract(r io.Reader, dir string, opts Options) (m *Manifest, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}

	defer func() {
		if err != nil {
			os.RemoveAll(dir) //nolint:errcheck // the refusal is what is reported
		}
	}()

	tr, err := open(r)
	if err != nil {
		return nil, err
	}

	if m, err = readManifest(tr, opts); err != nil {
		return nil, err
	}

	return m, extractFiles(tr, dir, m)
}

// ReadManifest reads and checks the manifest of the bundle r without
// reading its files: what a client needs to know which version a bundle
// installs before it uploads it. The files are checked by Extract, on the
// node.
func ReadManifest(r io.Reader) (*Manifest, error) {
	tr, err := open(r)
	if err != nil {
		return nil, err
	}

	return readManifest(tr, Options{})
}

// open reads r as a tar archive, through gzip when it starts as gzip does.
func open(r io.Reader) (*tar.Reader, error) {
	br := bufio.NewReader(r)

	magic, err := br.Peek(2)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}

	if !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return tar.NewReader(br), nil
	}

	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}

	return tar.NewReader(zr), nil
}

// readManifest reads the first entry as the manifest and checks it.
func readManifest(tr *tar.Reader, opts Options) (*Manifest, error) {
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("%w: no manifest: %v", ErrFormat, err)
	}

	switch {
	case hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg:
		return nil, fmt.Errorf("%w: the first entry is %s, not %s", ErrFormat, quote(hdr.Name), ManifestName)
	case hdr.Size > MaxManifest:
		return nil, fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, ManifestName, hdr.Size, MaxManifest)
	}

	dec := json.NewDecoder(io.LimitReader(tr, MaxManifest))
	dec.DisallowUnknownFields()

	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, ManifestName, err)
	}

	if err := m.check(); err != nil {
		return nil, err
	}

	if opts.Running != "" {
		if err := version.CheckUpgrade(opts.Running, m.Version); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	}

	return &m, nil
}

// check refuses a manifest that is not exactly Contents, each file once,
// within the limits, with a well-formed digest.
func (m *Manifest) check() error {
	if m.Format != FormatVersion {
		return fmt.Errorf("%w: manifest format %d, this node reads %d", ErrFormat, m.Format, FormatVersion)
	}

	if !version.IsSemver(m.Version) {
		return fmt.Errorf("%w: version %s is not semver", ErrFormat, quote(m.Version))
	}

	seen := map[string]bool{}
	total := int64(0)

	for _, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return err
		}

		if seen[f.Path] {
			return &pathError{f.Path, ErrExtraFile}
		}

		seen[f.Path] = true

		if f.Size < 0 || f.Size > MaxFile {
			return fmt.Errorf("%w: %s declares %d bytes, limit %d", ErrTooLarge, f.Path, f.Size, MaxFile)
		}

		if total += f.Size; total > MaxSize {
			return fmt.Errorf("%w: the files add up to over %d bytes", ErrTooLarge, MaxSize)
		}

		if d, err := hex.DecodeString(f.SHA256); err != nil || len(d) != sha256.Size {
			return fmt.Errorf("%w: %s: sha256 %s is not 64 hex digits", ErrFormat, f.Path, quote(f.SHA256))
		}
	}

	for _, p := range Contents() {
		if !seen[p] {
			return &pathError{p, ErrMissingFile}
		}
	}

	return nil
}

// extractFiles writes every archive entry after the manifest into dir,
// checked against m, and refuses an archive that lacks one of m's files.
func extractFiles(tr *tar.Reader, dir string, m *Manifest) error {
	want := map[string]File{}
	for _, f := range m.Files {
		want[f.Path] = f
	}

	for range MaxEntries {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			for p := range want {
				return &pathError{p, ErrMissingFile}
			}

			return nil
		}

		if err != nil {
			return fmt.Errorf("%w: %v", ErrFormat, err)
		}

		f, err := expect(hdr, want)
		if err != nil {
			return err
		}

		delete(want, f.Path)

		if err := writeFile(tr, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return err
		}
	}

	return fmt.Errorf("%w: over %d entries", ErrTooLarge, MaxEntries)
}

// expect returns the manifest's file of hdr, refusing a path outside the
// bundle, a file not (or no longer) expected, and a size that differs.
func expect(hdr *tar.Header, want map[string]File) (File, error) {
	if err := checkPath(hdr.Name); err != nil {
		return File{}, err
	}

	f, ok := want[hdr.Name]

	switch {
	case !ok:
		return File{}, &pathError{hdr.Name, ErrExtraFile}
	case hdr.Typeflag != tar.TypeReg:
		return File{}, fmt.Errorf("%w: %s is not a regular file", ErrFormat, quote(hdr.Name))
	case hdr.Size != f.Size:
		return File{}, fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrSize, hdr.Name, hdr.Size, f.Size)
	}

	return f, nil
}

// writeFile copies f's bytes from r to path and checks their digest.
func writeFile(r io.Reader, path string, f File) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}

	mode := os.FileMode(0o644)
	if filepath.Base(filepath.Dir(path)) == BinDir {
		mode = 0o755
	}

	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer out.Close()

	h := sha256.New()

	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrFormat, f.Path, err)
	case n != f.Size:
		return fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrSize, f.Path, n, f.Size)
	}

	want, _ := hex.DecodeString(f.SHA256)
	if subtle.ConstantTimeCompare(h.Sum(nil), want) != 1 {
		return fmt.Errorf("%w: %s", ErrDigest, f.Path)
	}

	return out.Sync()
}
