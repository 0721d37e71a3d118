package machineapi

import (
	"fmt"
	"io"

	"google.golang.org/grpc"

	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
)

// Receiver keeps the release bundles uploaded to the node.
type Receiver interface {
	// Receive reads size bytes from r, checks them against the SHA-256
	// digest (hex), keeps them and returns their reference, which
	// Upgrade takes as its image.
	Receive(r io.Reader, size int64, digest string) (string, error)
}

// BundleServer serves aegis.upgrade.BundleService, through which a
// release bundle reaches a node over the API; its refusals are mapped by
// the MachineService's toStatus.
type BundleServer struct {
	upgradeapi.UnimplementedBundleServiceServer

	s *Server
}

// BundleService returns the node's BundleService.
func (s *Server) BundleService() *BundleServer { return &BundleServer{s: s} }

// Register adds the service to a gRPC server.
func (b *BundleServer) Register(g *grpc.Server) { upgradeapi.RegisterBundleServiceServer(g, b) }

// Upload receives one bundle: a header, then its chunks, until the client
// closes its side; see api/upgrade/upgrade.proto.
func (b *BundleServer) Upload(stream grpc.ClientStreamingServer[upgradeapi.UploadRequest, upgradeapi.UploadResponse]) error {
	ref, err := b.upload(stream)
	if err != nil {
		return b.s.toStatus("Upload", err)
	}

	return stream.SendAndClose(&upgradeapi.UploadResponse{Messages: []*upgradeapi.Uploaded{{Ref: ref}}})
}

func (b *BundleServer) upload(stream grpc.ClientStreamingServer[upgradeapi.UploadRequest, upgradeapi.UploadResponse]) (string, error) {
	if b.s.cfg.Uploads == nil {
		return "", errNoUpgrader
	}

	first, err := stream.Recv()
	if err != nil {
		return "", err
	}

	h := first.GetHeader()
	if h == nil || len(first.GetChunk()) > 0 {
		return "", refuse(ErrBadRequest, "Upload: the first message holds the header (size, sha256) alone")
	}

	return b.s.cfg.Uploads.Receive(&chunkReader{stream: stream}, h.GetSize(), h.GetSha256())
}

// chunkReader reads an upload's chunks as one stream of bytes.
type chunkReader struct {
	stream grpc.ClientStreamingServer[upgradeapi.UploadRequest, upgradeapi.UploadResponse]
	buf    []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		msg, err := c.stream.Recv()
		if err != nil {
			return 0, err // io.EOF once the client closed its side
		}

		switch {
		case msg.GetHeader() != nil:
			return 0, refuse(ErrBadRequest, "Upload: a header after the first message")
		case len(msg.GetChunk()) > MaxUploadChunk:
			return 0, refuse(ErrBadRequest, fmt.Sprintf("Upload: a chunk of %d bytes, over %d", len(msg.GetChunk()), MaxUploadChunk))
		}

		c.buf = msg.GetChunk()
	}

	n := copy(p, c.buf)
	c.buf = c.buf[n:]

	return n, nil
}
