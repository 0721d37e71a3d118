package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/internal/version"
)

// entry is one archive entry of a hand-made bundle.
type entry struct {
	name string
	data []byte
	typ  byte
}

// goodEntries is a bundle's files: each path's content is the path itself.
func goodEntries() []entry {
	var out []entry
	for _, p := range Contents() {
		out = append(out, entry{name: p, data: []byte("content of " + p)})
	}

	return out
}

func manifestOf(v string, entries []entry) *Manifest {
	m := &Manifest{Format: FormatVersion, Version: v, Commit: "abc"}
	for _, e := range entries {
		sum := sha256.Sum256(e.data)
		m.Files = append(m.Files, File{Path: e.name, Size: int64(len(e.data)), SHA256: hex.EncodeToString(sum[:])})
	}

	return m
}

// archive writes raw as manifest.json then entries, gzip-compressed when gz.
func archive(t *testing.T, gz bool, raw []byte, entries []entry) []byte {
	t.Helper()

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)

	all := entries
	if raw != nil {
		all = append([]entry{{name: ManifestName, data: raw}}, entries...)
	}

	for _, e := range all {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}

		hdr := &tar.Header{Name: e.name, Typeflag: typ, Size: int64(len(e.data)), Mode: 0o644}
		if typ != tar.TypeReg {
			hdr.Size, hdr.Linkname = 0, "/etc/passwd"
		}

		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}

		if typ == tar.TypeReg {
			tw.Write(e.data) //nolint:errcheck // bytes.Buffer
		}
	}

	tw.Close() //nolint:errcheck // bytes.Buffer

	if !gz {
		return buf.Bytes()
	}

	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes()) //nolint:errcheck // bytes.Buffer
	zw.Close()            //nolint:errcheck // bytes.Buffer

	return z.Bytes()
}

func marshal(t *testing.T, m *Manifest) []byte {
	t.Helper()

	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}

	return raw
}

func TestWriteThenExtract(t *testing.T) {
	src := t.TempDir()
	for _, e := range goodEntries() {
		local := filepath.Join(src, filepath.Base(e.name))
		if filepath.Dir(e.name) == ImageDir {
			local = filepath.Join(src, "images", filepath.Base(e.name))
		}

		os.MkdirAll(filepath.Dir(local), 0o755) //nolint:errcheck // the write below fails instead
		if err := os.WriteFile(local, e.data, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	for _, plain := range []bool{false, true} {
		checkRoundTrip(t, Source{BinDir: src, Version: "v0.3.0", Commit: "abc", Plain: plain})
	}
}

// checkRoundTrip writes a bundle of src and extracts it again.
func checkRoundTrip(t *testing.T, src Source) {
	t.Helper()

	var buf bytes.Buffer
	if _, err := Write(&buf, src); err != nil {
		t.Fatal(err)
	}

	if gz := bytes.HasPrefix(buf.Bytes(), []byte{0x1f, 0x8b}); gz == src.Plain {
		t.Fatalf("Plain %v wrote gzip %v", src.Plain, gz)
	}

	if m, err := ReadManifest(bytes.NewReader(buf.Bytes())); err != nil || m.Version != src.Version {
		t.Fatalf("ReadManifest: %+v, %v", m, err)
	}

	dir := filepath.Join(t.TempDir(), "slot")

	m, err := Extract(bytes.NewReader(buf.Bytes()), dir, Options{Running: "v0.2.4"})
	if err != nil {
		t.Fatal(err)
	}

	if m.Version != "v0.3.0" || m.Commit != "abc" || len(m.Files) != len(Contents()) {
		t.Fatalf("manifest %+v", m)
	}

	for _, e := range goodEntries() {
		got, err := os.ReadFile(filepath.Join(dir, e.name))
		if err != nil || !bytes.Equal(got, e.data) {
			t.Fatalf("%s: %q, %v", e.name, got, err)
		}
	}

	if fi, err := os.Stat(filepath.Join(dir, "bin", "machined")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("bin/machined not executable: %v %v", fi, err)
	}
}

func TestExtractRefuses(t *testing.T) {
	good := goodEntries()
	v := "v0.3.0"

	tamper := func(f func(m *Manifest, es []entry) []entry) []byte {
		es := goodEntries()
		m := manifestOf(v, es)
		es = f(m, es)

		return archive(t, true, marshal(t, m), es)
	}

	for _, tc := range []struct {
		name    string
		bundle  []byte
		running string
		want    error
	}{
		{"plain tar is read", archive(t, false, marshal(t, manifestOf(v, good)), good), "", nil},
		{"digest", tamper(func(_ *Manifest, es []entry) []entry { es[2].data[0] ^= 1; return es }), "", ErrDigest},
		{"size in manifest", tamper(func(m *Manifest, es []entry) []entry { m.Files[1].Size++; return es }), "", ErrSize},
		{"missing from manifest", tamper(func(m *Manifest, es []entry) []entry { m.Files = m.Files[1:]; return es }), "", ErrMissingFile},
		{"missing from archive", tamper(func(_ *Manifest, es []entry) []entry { return es[:len(es)-1] }), "", ErrMissingFile},
		{"unknown in manifest", tamper(func(m *Manifest, es []entry) []entry { m.Files[0].Path = "bin/sh"; return es }), "", ErrUnknownFile},
		{"twice in manifest", tamper(func(m *Manifest, es []entry) []entry { m.Files[1] = m.Files[0]; return es }), "", ErrExtraFile},
		{"extra entry", tamper(func(_ *Manifest, es []entry) []entry { return append(es, entry{name: "bin/sh", data: []byte("x")}) }), "", ErrUnknownFile},
		{"entry twice", tamper(func(_ *Manifest, es []entry) []entry { return append(es[:1], es...) }), "", ErrExtraFile},
		{"traversal entry", tamper(func(_ *Manifest, es []entry) []entry {
			return append([]entry{{name: "bin/../../x", data: []byte("x")}}, es...)
		}), "", ErrPath},
		{"absolute entry", tamper(func(_ *Manifest, es []entry) []entry {
			return append([]entry{{name: "/etc/passwd", data: []byte("x")}}, es...)
		}), "", ErrPath},
		{"traversal in manifest", tamper(func(m *Manifest, es []entry) []entry { m.Files[0].Path = "../bin/machined"; return es }), "", ErrPath},
		{"symlink", tamper(func(_ *Manifest, es []entry) []entry { es[0].typ = tar.TypeSymlink; return es }), "", ErrFormat},
		{"oversize file", tamper(func(m *Manifest, es []entry) []entry { m.Files[0].Size = MaxFile + 1; return es }), "", ErrTooLarge},
		{"oversize manifest", archive(t, true, bytes.Repeat([]byte(" "), MaxManifest+1), good), "", ErrTooLarge},
		{"empty", nil, "", ErrFormat},
		{"manifest not first", archive(t, true, nil, append(good, entry{name: ManifestName, data: marshal(t, manifestOf(v, good))})), "", ErrFormat},
		{"unknown manifest field", archive(t, true, []byte(`{"format":1,"version":"v0.3.0","files":[],"extra":1}`), good), "", ErrFormat},
		{"format version", tamper(func(m *Manifest, es []entry) []entry { m.Format = 2; return es }), "", ErrFormat},
		{"bad digest text", tamper(func(m *Manifest, es []entry) []entry { m.Files[0].SHA256 = "zz"; return es }), "", ErrFormat},
		{"not semver", tamper(func(m *Manifest, es []entry) []entry { m.Version = "3"; return es }), "", ErrFormat},
		{"not an archive", []byte("hello, this is not a tar archive at all, but long enough"), "", ErrFormat},
		{"skew", archive(t, true, marshal(t, manifestOf(v, good)), good), "v0.1.0", version.ErrSkew},
		{"downgrade", archive(t, true, marshal(t, manifestOf(v, good)), good), "v0.3.1", version.ErrDowngrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "slot")

			_, err := Extract(bytes.NewReader(tc.bundle), dir, Options{Running: tc.running})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}

				return
			}

			if !errors.Is(err, tc.want) {
				t.Fatalf("Extract: %v, want %v", err, tc.want)
			}

			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Fatalf("a refused bundle left %s behind (%v)", dir, serr)
			}
		})
	}
}

func TestReadManifestRefuses(t *testing.T) {
	good := goodEntries()
	m := manifestOf("v0.3.0", good)
	m.Files = m.Files[1:]

	if _, err := ReadManifest(bytes.NewReader(archive(t, true, marshal(t, m), good))); !errors.Is(err, ErrMissingFile) {
		t.Fatalf("ReadManifest of a manifest that lacks a file: %v", err)
	}

	if _, err := ReadManifest(bytes.NewReader([]byte("not a bundle, not a tar archive"))); !errors.Is(err, ErrFormat) {
		t.Fatalf("ReadManifest of text: %v", err)
	}
}

func TestExtractRefusesExistingDir(t *testing.T) {
	dir := t.TempDir()
	good := goodEntries()

	if _, err := Extract(bytes.NewReader(archive(t, true, marshal(t, manifestOf("v0.3.0", good)), good)), dir, Options{}); err == nil {
		t.Fatal("Extract wrote into an existing directory")
	}

	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Extract removed a directory it did not make: %v", err)
	}
}
