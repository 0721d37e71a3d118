// Package ociimage writes OCI image archives of Aegis's own static binaries:
// one layer holding the binary and the /etc/passwd and /etc/group that name
// the service's user, no shell, no libraries. The archive is an OCI image
// layout in a tar stream, the form containerd imports. The same input always
// gives the same bytes, so the same manifest digest: a machine compares
// digests to know whether its imported image is current.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// RefAnnotation is the index annotation containerd reads as an imported
// image's name.
const RefAnnotation = "io.containerd.image.name"

// epoch dates every file and the image itself: the archive depends on its
// content only.
var epoch = time.Unix(0, 0).UTC()

// User is the account a service runs as.
type User struct {
	Name string
	UID  uint32
	GID  uint32
}

// Spec describes one image. Name, Binary and User are required.
type Spec struct {
	// Name is the image reference, such as "aegis.local/apid:v1".
	Name string
	// Binary is the path of the static executable put at /usr/local/bin/<base name>:
	// a Linux ELF executable of the image's architecture (the machine's,
	// runtime.GOARCH) without a program interpreter. Write refuses any other.
	Binary string
	// User owns nothing in the image; it is named in /etc/passwd and is the
	// image's default user.
	User User
}

// EntryPath is where the image holds its binary.
func EntryPath(binary string) string { return path.Join("/usr/local/bin", path.Base(binary)) }

// Write writes the image archive of spec to w and returns the manifest's
// digest.
func Write(w io.Writer, spec Spec) (digest.Digest, error) {
	if spec.Name == "" || spec.Binary == "" || spec.User.Name == "" {
		return "", errors.New("ociimage: a spec needs a name, a binary and a user")
	}

	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}

	if err := checkBinary(spec.Binary, bin, runtime.GOARCH); err != nil {
		return "", err
	}

	layer, err := rootfs(spec, bin)
	if err != nil {
		return "", err
	}

	layerDesc := descriptor(ocispec.MediaTypeImageLayer, layer)

	config, err := json.Marshal(ocispec.Image{
		Created:  &epoch,
		Platform: ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Config: ocispec.ImageConfig{
			User:       fmt.Sprintf("%d:%d", spec.User.UID, spec.User.GID),
			Entrypoint: []string{EntryPath(spec.Binary)},
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	})
	if err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}

	configDesc := descriptor(ocispec.MediaTypeImageConfig, config)

	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: configDesc, Layers: []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}

	manifestDesc := descriptor(ocispec.MediaTypeImageManifest, manifest)
	manifestDesc.Platform = &ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH}
	manifestDesc.Annotations = map[string]string{RefAnnotation: spec.Name, ocispec.AnnotationRefName: spec.Name}

	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifestDesc},
	})
	if err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}

	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion}) //nolint:errcheck // a fixed struct

	tw := tar.NewWriter(w)

	for _, f := range []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, layout},
		{ocispec.ImageIndexFile, index},
		{blobPath(configDesc.Digest), config},
		{blobPath(layerDesc.Digest), layer},
		{blobPath(manifestDesc.Digest), manifest},
	} {
		if err := addFile(tw, f.name, f.data, 0o644, 0, 0); err != nil {
			return "", err
		}
	}

	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}

	return manifestDesc.Digest, nil
}

// rootfs is the image's only layer, an uncompressed tar.
func rootfs(spec Spec, bin []byte) ([]byte, error) {
	u := spec.User
	passwd := fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\n%s:x:%d:%d:%s:/:/sbin/nologin\n", u.Name, u.UID, u.GID, u.Name)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", u.Name, u.GID)

	var buf bytes.Buffer

	tw := tar.NewWriter(&buf)

	for _, dir := range []string{"etc/", "tmp/", "usr/", "usr/local/", "usr/local/bin/"} {
		mode := int64(0o755)
		if dir == "tmp/" {
			mode = 0o1777
		}

		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("ociimage: %w", err)
		}
	}

	for _, f := range []struct {
		name string
		data []byte
		mode int64
	}{
		{"etc/group", []byte(group), 0o644},
		{"etc/passwd", []byte(passwd), 0o644},
		{EntryPath(spec.Binary)[1:], bin, 0o755},
	} {
		if err := addFile(tw, f.name, f.data, f.mode, 0, 0); err != nil {
			return nil, err
		}
	}

	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}

	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64, uid, gid int) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)),
		Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("ociimage: %s: %w", name, err)
	}

	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("ociimage: %s: %w", name, err)
	}

	return nil
}

func descriptor(mediaType string, data []byte) ocispec.Descriptor {
	sum := sha256.Sum256(data)

	return ocispec.Descriptor{
		MediaType: mediaType, Size: int64(len(data)),
		Digest: digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:])),
	}
}

func blobPath(d digest.Digest) string {
	return path.Join(ocispec.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}
