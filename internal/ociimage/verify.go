package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// maxMetadata bounds index.json, manifests and configs read into memory:
// ours are a few hundred bytes.
const maxMetadata = 1 << 20

// Verified is what Verify found in an archive.
type Verified struct {
	// Name is the image reference the index names.
	Name string
	// Digest is the manifest's digest.
	Digest digest.Digest
}

// Verify reads a whole image archive and checks it as a machine must before
// importing it: one manifest in the index, with a name; every blob's
// content matches its digest and size; the manifest's config and layers
// are all there. A damaged or truncated archive fails, saying what is wrong.
func Verify(r io.Reader) (Verified, error) {
	tr := tar.NewReader(r)
	blobs := map[digest.Digest]int64{}
	metadata := map[digest.Digest][]byte{}

	var index []byte

	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return Verified{}, fmt.Errorf("not a whole tar archive: %w", err)
		}

		if hdr.Typeflag != tar.TypeReg {
			continue
		}

		name := strings.TrimPrefix(hdr.Name, "./")

		switch {
		case name == ocispec.ImageIndexFile:
			if index, err = io.ReadAll(io.LimitReader(tr, maxMetadata)); err != nil {
				return Verified{}, fmt.Errorf("index.json: %w", err)
			}
		case strings.HasPrefix(name, ocispec.ImageBlobsDir+"/sha256/"):
			d, small, err := hashBlob(tr, strings.TrimPrefix(name, ocispec.ImageBlobsDir+"/sha256/"), hdr.Size)
			if err != nil {
				return Verified{}, err
			}

			blobs[d] = hdr.Size
			if small != nil {
				metadata[d] = small
			}
		}
	}

	return check(index, blobs, metadata)
}

// hashBlob checks one blob against the digest its name carries and keeps
// its content when it is small enough to be a manifest or config.
func hashBlob(r io.Reader, encoded string, size int64) (digest.Digest, []byte, error) {
	want := digest.NewDigestFromEncoded(digest.SHA256, encoded)
	if err := want.Validate(); err != nil {
		return "", nil, fmt.Errorf("blob %s: %w", encoded, err)
	}

	h := sha256.New()

	var keep []byte

	if size <= maxMetadata {
		b, err := io.ReadAll(r)
		if err != nil {
			return "", nil, fmt.Errorf("blob %s: %w", want, err)
		}

		h.Write(b)
		keep = b
	} else if _, err := io.Copy(h, r); err != nil {
		return "", nil, fmt.Errorf("blob %s: %w", want, err)
	}

	if got := hex.EncodeToString(h.Sum(nil)); got != encoded {
		return "", nil, fmt.Errorf("blob %s: content does not match its digest (sha256:%s)", want, got)
	}

	return want, keep, nil
}

func check(index []byte, blobs map[digest.Digest]int64, metadata map[digest.Digest][]byte) (Verified, error) {
	if index == nil {
		return Verified{}, errors.New("no index.json: not an OCI image layout")
	}

	var idx ocispec.Index
	if err := json.Unmarshal(index, &idx); err != nil {
		return Verified{}, fmt.Errorf("index.json: %w", err)
	}

	if len(idx.Manifests) != 1 {
		return Verified{}, fmt.Errorf("index.json: %d manifests, want 1", len(idx.Manifests))
	}

	md := idx.Manifests[0]

	name := md.Annotations[RefAnnotation]
	if name == "" {
		return Verified{}, errors.New("index.json: the manifest has no image name")
	}

	raw, ok := metadata[md.Digest]
	if !ok || int64(len(raw)) != md.Size {
		return Verified{}, fmt.Errorf("manifest %s: missing or of the wrong size", md.Digest)
	}

	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Verified{}, fmt.Errorf("manifest %s: %w", md.Digest, err)
	}

	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if size, ok := blobs[d.Digest]; !ok || size != d.Size {
			return Verified{}, fmt.Errorf("blob %s: missing or of the wrong size", d.Digest)
		}
	}

	return Verified{Name: name, Digest: md.Digest}, nil
}
