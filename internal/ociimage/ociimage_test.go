package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// writeBinary writes a static executable of the machine's architecture
// that holds content.
func writeBinary(t *testing.T, content string) string {
	t.Helper()

	p := filepath.Join(t.TempDir(), "apid")
	if err := os.WriteFile(p, staticELF(t, content), 0o755); err != nil {
		t.Fatal(err)
	}

	return p
}

func TestWriteIsDeterministic(t *testing.T) {
	spec := Spec{Name: ImageName("apid"), Binary: writeBinary(t, "binary v1"), User: User{Name: "apid", UID: 52000, GID: 52000}}

	var a, b bytes.Buffer

	da, err := Write(&a, spec)
	if err != nil {
		t.Fatal(err)
	}

	db, err := Write(&b, spec)
	if err != nil {
		t.Fatal(err)
	}

	if da != db || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two writes of one spec differ: %s, %s", da, db)
	}

	spec.Binary = writeBinary(t, "binary v2")

	dc, err := Write(io.Discard, spec)
	if err != nil {
		t.Fatal(err)
	}

	if dc == da {
		t.Fatal("another binary gave the same digest")
	}
}

func TestArchiveLayout(t *testing.T) {
	var buf bytes.Buffer

	d, err := Write(&buf, Spec{Name: ImageName("trustd"), Binary: writeBinary(t, "x"), User: User{Name: "trustd", UID: 7, GID: 8}})
	if err != nil {
		t.Fatal(err)
	}

	files := untar(t, buf.Bytes())

	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}

	if len(index.Manifests) != 1 || index.Manifests[0].Digest != d || index.Manifests[0].Annotations[RefAnnotation] != ImageName("trustd") {
		t.Fatalf("index: %+v", index)
	}

	var m ocispec.Manifest
	if err := json.Unmarshal(files[blobPath(d)], &m); err != nil {
		t.Fatal(err)
	}

	var cfg ocispec.Image
	if err := json.Unmarshal(files[blobPath(m.Config.Digest)], &cfg); err != nil {
		t.Fatal(err)
	}

	if cfg.Config.User != "7:8" || cfg.Config.Entrypoint[0] != "/usr/local/bin/apid" {
		t.Fatalf("config: %+v", cfg.Config)
	}

	rootfs := untar(t, files[blobPath(m.Layers[0].Digest)])
	if string(rootfs["etc/passwd"]) != "root:x:0:0:root:/:/sbin/nologin\ntrustd:x:7:8:trustd:/:/sbin/nologin\n" {
		t.Fatalf("passwd: %q", rootfs["etc/passwd"])
	}

	for name := range rootfs {
		switch name {
		case "etc/passwd", "etc/group", "usr/local/bin/apid":
		default:
			t.Errorf("unexpected file in the root filesystem: %s", name)
		}
	}
}

func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()

	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))

	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}

		if err != nil {
			t.Fatal(err)
		}

		if hdr.Typeflag == tar.TypeReg {
			out[hdr.Name], _ = io.ReadAll(tr)
		}
	}
}

func TestVerify(t *testing.T) {
	var buf bytes.Buffer

	d, err := Write(&buf, Spec{Name: ImageName("apid"), Binary: writeBinary(t, strings.Repeat("binary", 1000)), User: User{Name: "apid", UID: 1, GID: 1}})
	if err != nil {
		t.Fatal(err)
	}

	good := buf.Bytes()

	v, err := Verify(bytes.NewReader(good))
	if err != nil || v.Digest != d || v.Name != ImageName("apid") {
		t.Fatalf("Verify = %+v, %v; want %s", v, err, d)
	}

	flipped := bytes.Clone(good)
	i := bytes.Index(flipped, []byte("binarybinary"))
	flipped[i] = 'B'

	for name, data := range map[string][]byte{
		"truncated": good[:len(good)/2],
		"flipped":   flipped,
		"empty":     nil,
		"not tar":   []byte("hello"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Verify(bytes.NewReader(data)); err == nil {
				t.Fatal("a damaged archive verified")
			}
		})
	}
}
