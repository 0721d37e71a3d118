package upgrade

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestUploads(t *testing.T) {
	u := Uploads{Dir: filepath.Join(t.TempDir(), "uploads")}
	data := []byte("a bundle")
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])

	for _, tc := range []struct {
		name   string
		data   []byte
		size   int64
		digest string
	}{
		{"short", data[:3], int64(len(data)), digest},
		{"long", append(data, 'x'), int64(len(data)), digest},
		{"other digest", []byte("a bundlf"), int64(len(data)), digest},
		{"bad digest", data, int64(len(data)), "xyz"},
		{"too large", data, MaxUpload + 1, digest},
		{"empty", nil, 0, digest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := u.Receive(bytes.NewReader(tc.data), tc.size, tc.digest); !errors.Is(err, ErrUpload) {
				t.Fatalf("Receive: %v, want ErrUpload", err)
			}

			if left, _ := filepath.Glob(filepath.Join(u.Dir, "*")); len(left) != 0 {
				t.Fatalf("a refused upload left %q", left)
			}
		})
	}

	ref, err := u.Receive(bytes.NewReader(data), int64(len(data)), digest)
	if err != nil || ref != UploadRefPrefix+digest {
		t.Fatalf("Receive: %q, %v", ref, err)
	}

	p, err := u.Path(digest)
	if got, _ := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Path: %s %v", p, err)
	}

	other := []byte("the next bundle")
	sum = sha256.Sum256(other)

	if _, err := u.Receive(bytes.NewReader(other), int64(len(other)), hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}

	if _, err := u.Path(digest); err == nil {
		t.Fatal("an older upload was kept")
	}

	if _, err := u.Path("../../etc/passwd"); err == nil {
		t.Fatal("Path took a path")
	}
}
