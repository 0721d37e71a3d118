package upgrade

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrUpload refuses an upload whose size or digest differs from what its
// header said, or that is over MaxUpload; the API maps it to
// InvalidArgument.
var ErrUpload = errors.New("upgrade: upload refused")

// UploadRefPrefix starts the reference of an uploaded bundle, which the
// BundleService's Upload returns and MachineService.Upgrade takes as its
// image: "upload:" then the bundle's SHA-256 in lowercase hex.
const UploadRefPrefix = "upload:"

// Uploads keeps the release bundles uploaded to a node, each in a file
// named by its SHA-256; only the latest is kept, so that uploads never
// fill the disk.
type Uploads struct {
	// Dir is the node's upload folder.
	Dir string
}

// Path is the file of the uploaded bundle with the given SHA-256 (hex).
func (u Uploads) Path(digest string) (string, error) {
	if b, err := hex.DecodeString(digest); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("upgrade: %q is not an upload reference's SHA-256 (64 hex digits)", digest)
	}

	p := filepath.Join(u.Dir, digest+".bundle")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("upgrade: no bundle of SHA-256 %s was uploaded to this node (only the latest upload is kept); upload it again", digest)
	}

	return p, nil
}

// Receive writes size bytes read from r into the upload folder and checks
// them against digest (hex SHA-256); it returns the bundle's reference
// (UploadRefPrefix and the digest) once the file is in place, and removes
// every older upload then.
func (u Uploads) Receive(r io.Reader, size int64, digest string) (string, error) {
	want, err := hex.DecodeString(digest)

	switch {
	case err != nil || len(want) != sha256.Size:
		return "", fmt.Errorf("%w: sha256 %q is not 64 hex digits", ErrUpload, digest)
	case size <= 0 || size > MaxUpload:
		return "", fmt.Errorf("%w: size %d outside 1 to %d bytes", ErrUpload, size, MaxUpload)
	}

	if err := os.MkdirAll(u.Dir, 0o700); err != nil {
		return "", err
	}

	tmp, err := os.CreateTemp(u.Dir, ".receiving-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // renamed on success
	defer tmp.Close()

	h := sha256.New()

	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, size+1))
	switch {
	case err != nil:
		return "", err
	case n != size:
		return "", fmt.Errorf("%w: %d bytes received, the header said %d", ErrUpload, n, size)
	case subtle.ConstantTimeCompare(h.Sum(nil), want) != 1:
		return "", fmt.Errorf("%w: the bytes received do not have SHA-256 %s", ErrUpload, digest)
	}

	if err := tmp.Sync(); err != nil {
		return "", err
	}

	digest = hex.EncodeToString(want)
	if err := os.Rename(tmp.Name(), filepath.Join(u.Dir, digest+".bundle")); err != nil {
		return "", err
	}

	u.removeOthers(digest)

	return UploadRefPrefix + digest, nil
}

// removeOthers removes every upload but keep's.
func (u Uploads) removeOthers(keep string) {
	old, _ := filepath.Glob(filepath.Join(u.Dir, "*.bundle"))
	for _, p := range old {
		if filepath.Base(p) != keep+".bundle" {
			os.Remove(p) //nolint:errcheck // the next upload tries again
		}
	}
}
