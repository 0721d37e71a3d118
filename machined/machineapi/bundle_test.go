package machineapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// uploadStream is a client's side of Upload, as messages.
type uploadStream struct {
	grpc.ServerStream
	msgs []*upgradeapi.UploadRequest
	resp *upgradeapi.UploadResponse
}

func (u *uploadStream) Context() context.Context { return context.Background() }

func (u *uploadStream) Recv() (*upgradeapi.UploadRequest, error) {
	if len(u.msgs) == 0 {
		return nil, io.EOF
	}

	m := u.msgs[0]
	u.msgs = u.msgs[1:]

	return m, nil
}

func (u *uploadStream) SendAndClose(r *upgradeapi.UploadResponse) error { u.resp = r; return nil }

func TestUpload(t *testing.T) {
	data := []byte(strings.Repeat("bundle bytes ", 1000))
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	header := &upgradeapi.UploadRequest{Header: &upgradeapi.UploadHeader{Size: int64(len(data)), Sha256: digest}}
	chunks := []*upgradeapi.UploadRequest{{Chunk: data[:5000]}, {Chunk: data[5000:]}}

	for _, tc := range []struct {
		name string
		msgs []*upgradeapi.UploadRequest
		code codes.Code
		says string
	}{
		{"whole", append([]*upgradeapi.UploadRequest{header}, chunks...), codes.OK, ""},
		{"no header", chunks, codes.InvalidArgument, "header"},
		{"header twice", append([]*upgradeapi.UploadRequest{header, header}, chunks...), codes.InvalidArgument, "header after"},
		{"short", []*upgradeapi.UploadRequest{header, chunks[0]}, codes.InvalidArgument, "bytes received"},
		{"chunk too large", []*upgradeapi.UploadRequest{header, {Chunk: make([]byte, MaxUploadChunk+1)}}, codes.InvalidArgument, "over"},
		{"damaged", []*upgradeapi.UploadRequest{header, chunks[1], chunks[0]}, codes.InvalidArgument, "SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Uploads: upgrade.Uploads{Dir: t.TempDir()}})
			stream := &uploadStream{msgs: tc.msgs}

			err := s.BundleService().Upload(stream)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.says) {
				t.Fatalf("Upload: %v, want %s saying %q", err, tc.code, tc.says)
			}

			if err == nil && stream.resp.GetMessages()[0].GetRef() != upgrade.UploadRefPrefix+digest {
				t.Fatalf("reference %q", stream.resp.GetMessages()[0].GetRef())
			}
		})
	}
}
