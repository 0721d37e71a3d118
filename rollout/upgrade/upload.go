package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/client"

	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
)

// Upload is the UploadFunc of aegis.upgrade.BundleService: it streams the
// bundle at path to the member ctx is routed to, its size and SHA-256 in
// the first message, and returns the reference the member gave it
// ("upload:<sha256>"). The member checks both before it keeps the file,
// so a bundle damaged on the way is refused there, named.
func Upload(ctx context.Context, c *client.Client, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("release bundle: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only

	h := sha256.New()

	size, err := io.Copy(h, f)
	if err != nil {
		return "", fmt.Errorf("release bundle %s: %w", path, err)
	}

	if _, err = f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("release bundle %s: %w", path, err)
	}

	stream, err := upgradeapi.NewBundleServiceClient(c.Conn()).Upload(ctx)
	if err != nil {
		return "", err
	}

	header := &upgradeapi.UploadHeader{Size: size, Sha256: hex.EncodeToString(h.Sum(nil))}
	if err = stream.Send(&upgradeapi.UploadRequest{Header: header}); err != nil {
		return "", uploadError(stream, err)
	}

	buf := make([]byte, UploadChunk)

	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if err = stream.Send(&upgradeapi.UploadRequest{Chunk: buf[:n]}); err != nil {
				return "", uploadError(stream, err)
			}
		}

		if errors.Is(rerr, io.EOF) {
			break
		}

		if rerr != nil {
			return "", fmt.Errorf("release bundle %s: %w", path, rerr)
		}
	}

	resp, err := stream.CloseAndRecv()
	if err != nil {
		return "", err
	}

	if len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetRef() == "" {
		return "", fmt.Errorf("the node answered the upload with %d references, want one", len(resp.GetMessages()))
	}

	return resp.GetMessages()[0].GetRef(), nil
}

// uploadError is the node's own answer when a send fails because the node
// ended the stream (a refusal), else err.
func uploadError(stream upgradeapi.BundleService_UploadClient, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}

	if _, rerr := stream.CloseAndRecv(); rerr != nil {
		return rerr
	}

	return err
}
