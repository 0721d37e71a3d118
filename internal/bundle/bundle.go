// Package bundle is Aegis's release bundle: one file per version holding
// everything a node runs (machined, apid, trustd and etcd, and the OCI
// image archives of apid, trustd and etcd), with a manifest that names the
// version and the size and SHA-256 of every file.
//
// A bundle is a tar archive, gzip-compressed or not. Its first entry is
// manifest.json; the files follow, each a regular file at one of the fixed
// paths of Contents. Write makes one from a `make build` tree; Extract
// reads one into a new directory, and refuses (before that directory is
// left behind) a bundle that is not exactly what its manifest says: a
// digest or size that differs, a file missing, unknown or twice, a path
// that leaves the directory, an entry over the limits of limits.go, or a
// version outside the skew policy of internal/version.
package bundle

import (
	"errors"
	"path"
	"slices"
	"strings"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// ManifestName is the archive entry of the manifest, always the first.
const ManifestName = "manifest.json"

// Manifest describes a bundle: the Aegis version it installs and every file
// it holds.
type Manifest struct {
	// Format is FormatVersion.
	Format int `json:"format"`
	// Version is the Aegis version of the binaries (semver, leading v).
	Version string `json:"version"`
	// Commit is the git commit they were built from; may be empty.
	Commit string `json:"commit,omitempty"`
	// Files lists every file of the bundle in archive order.
	Files []File `json:"files"`
}

// File is one file of a bundle.
type File struct {
	// Path is the file's path in the archive and below the directory it
	// is extracted to, one of Contents.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
}

// Binaries are the executables of a bundle, under bin/.
var binaries = []string{"machined", "apid", "trustd", "etcd"}

// images are the services whose OCI archives a bundle holds, under images/.
var images = []string{"apid", "trustd", "etcd"}

// Contents returns the paths every bundle holds, exactly: the binaries
// under bin/ and the image archives under images/.
func Contents() []string {
	var out []string
	for _, b := range binaries {
		out = append(out, BinDir+"/"+b)
	}

	for _, i := range images {
		out = append(out, ImageDir+"/"+i+".tar")
	}

	return out
}

// BinDir and ImageDir are the folders of an extracted bundle that machined
// takes as --bin-dir and --image-dir.
const (
	BinDir   = "bin"
	ImageDir = "images"
)

// Sentinels of Extract's refusals. Every one wraps ErrInvalid, which the
// API boundary maps to InvalidArgument.
var (
	// ErrInvalid is what every refusal of a damaged bundle wraps.
	ErrInvalid = errors.New("bundle: invalid")
	// ErrFormat is an archive or manifest that cannot be read as a bundle.
	ErrFormat = wrap("not a release bundle")
	// ErrPath is a path that is not one clean relative path.
	ErrPath = wrap("path outside the bundle")
	// ErrUnknownFile is a manifest entry that is not one of Contents.
	ErrUnknownFile = wrap("unknown file")
	// ErrMissingFile is a file of Contents absent from the manifest or the archive.
	ErrMissingFile = wrap("missing file")
	// ErrExtraFile is an archive entry the manifest does not name, or one named twice.
	ErrExtraFile = wrap("file not in the manifest")
	// ErrTooLarge is an entry or a bundle over the limits of limits.go.
	ErrTooLarge = wrap("too large")
	// ErrSize is a file whose length differs from the manifest's.
	ErrSize = wrap("size differs from the manifest")
	// ErrDigest is a file whose SHA-256 differs from the manifest's.
	ErrDigest = wrap("digest differs from the manifest")
)

func wrap(msg string) error { return &kind{msg} }

// kind is a refusal that is also ErrInvalid.
type kind struct{ msg string }

func (k *kind) Error() string { return "bundle: " + k.msg }

func (k *kind) Is(target error) bool { return target == ErrInvalid }

// checkPath refuses a path that is absolute, not clean, or leaves its
// directory, then one that is not one of Contents.
func checkPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "\\") {
		return &pathError{p, ErrPath}
	}

	if !slices.Contains(Contents(), p) {
		return &pathError{p, ErrUnknownFile}
	}

	return nil
}

// pathError names the path of a refusal.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() + ": " + quote(e.path) }

func (e *pathError) Unwrap() error { return e.err }

// quote shows a name from outside, cut short and quoted.
func quote(s string) string {
	const most = 80
	if len(s) > most {
		s = s[:most] + "…"
	}

	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
