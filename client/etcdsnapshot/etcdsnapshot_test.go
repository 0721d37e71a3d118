package etcdsnapshot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/etcdsnap/etcdsnaptest"
)

// fakeNode serves one snapshot and records what is uploaded.
type fakeNode struct {
	data     []byte
	err      error
	uploaded []byte
}

func (f *fakeNode) EtcdSnapshot(context.Context, *machine.EtcdSnapshotRequest, ...grpc.CallOption) (io.ReadCloser, error) {
	if f.err != nil {
		return nil, f.err
	}

	return io.NopCloser(bytes.NewReader(f.data)), nil
}

func (f *fakeNode) EtcdRecover(_ context.Context, r io.Reader, _ ...grpc.CallOption) (*machine.EtcdRecoverResponse, error) {
	if f.err != nil {
		return nil, f.err
	}

	data, err := io.ReadAll(r)
	f.uploaded = data

	return &machine.EtcdRecoverResponse{}, err
}

// leftovers lists the files of dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}

	return names
}

func TestSave(t *testing.T) {
	good := etcdsnaptest.Snapshot(t, 3)
	explained := errors.New("explained")

	tests := []struct {
		name    string
		node    *fakeNode
		explain func(error) error
		wantErr string
	}{
		{name: "saved", node: &fakeNode{data: good}},
		{name: "truncated", node: &fakeNode{data: good[:len(good)-1]}, wantErr: "the snapshot received is not usable"},
		{name: "call fails", node: &fakeNode{err: errors.New("refused")}, wantErr: "refused"},
		{
			name: "call fails, explained", node: &fakeNode{err: errors.New("refused")},
			explain: func(error) error { return explained }, wantErr: "explained",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "db.snapshot")

			info, err := Save(context.Background(), path, Options{Client: tt.node, Explain: tt.explain})

			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Save: %v, want an error with %q", err, tt.wantErr)
				}

				if left := leftovers(t, dir); len(left) > 0 {
					t.Fatalf("a failed save left %v", left)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if info.Size != int64(len(good)) || info.Revision != 3 {
				t.Fatalf("info = %+v, want %d bytes at revision 3", info, len(good))
			}

			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, good) {
				t.Fatalf("saved file differs from the snapshot (%v)", err)
			}

			if left := leftovers(t, dir); len(left) != 1 {
				t.Fatalf("files after a save: %v, want the snapshot only", left)
			}
		})
	}
}

func TestUpload(t *testing.T) {
	good := etcdsnaptest.Snapshot(t, 2)
	dir := t.TempDir()

	valid := filepath.Join(dir, "good")
	if err := os.WriteFile(valid, good, 0o600); err != nil {
		t.Fatal(err)
	}

	corrupt := filepath.Join(dir, "corrupt")
	if err := os.WriteFile(corrupt, good[:len(good)-4], 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("valid file is sent", func(t *testing.T) {
		node := &fakeNode{}
		if err := Upload(context.Background(), valid, Options{Client: node}); err != nil {
			t.Fatal(err)
		}

		if !bytes.Equal(node.uploaded, good) {
			t.Fatal("the node received something else than the file")
		}
	})

	t.Run("corrupt file is never sent", func(t *testing.T) {
		node := &fakeNode{}

		err := Upload(context.Background(), corrupt, Options{Client: node})
		if err == nil || !strings.HasPrefix(err.Error(), corrupt+": ") {
			t.Fatalf("Upload: %v, want a refusal naming the file", err)
		}

		if node.uploaded != nil {
			t.Fatal("a corrupt snapshot was sent")
		}
	})

	t.Run("refusal explained", func(t *testing.T) {
		node := &fakeNode{err: errors.New("etcd has data")}

		err := Upload(context.Background(), valid, Options{Client: node, Explain: func(err error) error { return errors.New("node: " + err.Error()) }})
		if err == nil || err.Error() != "node: etcd has data" {
			t.Fatalf("Upload: %v", err)
		}
	})
}
