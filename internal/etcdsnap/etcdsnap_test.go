package etcdsnap

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/internal/etcdsnap/etcdsnaptest"
)

func writeTemp(t testing.TB, data []byte) string {
	t.Helper()

	path := filepath.Join(t.TempDir(), "snapshot")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	return path
}

func TestCheck(t *testing.T) {
	good := etcdsnaptest.Snapshot(t, 42)

	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0xff

	noBucket := func() []byte {
		data := []byte("x")
		for len(data) < 4096 {
			data = append(data, data...)
		}

		sum := sha256.Sum256(data)

		return append(data, sum[:]...)
	}()

	tests := []struct {
		name     string
		data     []byte
		revision int64
		invalid  bool
	}{
		{name: "etcd snapshot", data: good, revision: 42},
		{name: "truncated", data: good[:len(good)-100], invalid: true},
		{name: "one byte changed", data: flipped, invalid: true},
		{name: "empty", data: nil, invalid: true},
		{name: "hash right, no bbolt file", data: noBucket, invalid: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Check(writeTemp(t, tt.data))

			if tt.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}

				return
			}

			if err != nil || info.Revision != tt.revision || info.Size != int64(len(tt.data)) || info.Keys != 42 {
				t.Fatalf("info = %+v, err = %v", info, err)
			}
		})
	}
}

func TestCheckMissingFile(t *testing.T) {
	if _, err := Check(filepath.Join(t.TempDir(), "none")); err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want a file error", err)
	}
}

// FuzzCheck: whatever a file holds, Check answers without panicking, and
// accepts nothing whose hash does not match.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("not a snapshot"))
	f.Add(make([]byte, minSize))

	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := Check(writeTemp(t, data))
		if err == nil && info.Size != int64(len(data)) {
			t.Fatalf("accepted with size %d of %d", info.Size, len(data))
		}
	})
}
