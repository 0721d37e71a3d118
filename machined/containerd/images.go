package containerd

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/errdefs"

	"github.com/aegis-os/aegis/internal/ociimage"
)

// VerifyArchive checks the image archive at path (see ociimage.Verify); the
// error names the file.
func VerifyArchive(path string) (ociimage.Verified, error) {
	f, err := os.Open(path)
	if err != nil {
		return ociimage.Verified{}, fmt.Errorf("containerd: image archive: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only

	v, err := ociimage.Verify(f)
	if err != nil {
		return ociimage.Verified{}, fmt.Errorf("containerd: image archive %s is damaged: %w", path, err)
	}

	return v, nil
}

// EnsureImage makes the image of a verified archive present and unpacked
// in containerd: nothing is done when containerd holds that image at the
// archive's digest already; else the archive is imported (and the name
// moves to the new digest only once the import is whole) and unpacked.
func (d *Daemon) EnsureImage(ctx context.Context, path string, want ociimage.Verified) error {
	img, err := d.client.GetImage(ctx, want.Name)

	switch {
	case err == nil && img.Target().Digest == want.Digest:
	case err == nil || errdefs.IsNotFound(err):
		if err := d.importArchive(ctx, path); err != nil {
			return err
		}

		if img, err = d.client.GetImage(ctx, want.Name); err != nil {
			return fmt.Errorf("containerd: image %s after import: %w", want.Name, err)
		}

		if img.Target().Digest != want.Digest {
			return fmt.Errorf("containerd: %s imported as %s, the archive says %s", path, img.Target().Digest, want.Digest)
		}
	default:
		return fmt.Errorf("containerd: image %s: %w", want.Name, err)
	}

	unpacked, err := img.IsUnpacked(ctx, "")
	if err == nil && unpacked {
		return nil
	}

	if err := img.Unpack(ctx, ""); err != nil {
		return fmt.Errorf("containerd: unpacking %s: %w", want.Name, err)
	}

	return nil
}

// importArchive imports the archive at path into containerd's content
// store. Imports run one at a time: containerd's importer writes every
// archive's index.json under the one ingest reference "tar-index.json",
// so imports made at once lock each other out, and the losers wait in the
// client's random backoff (up to seconds) rather than queueing. Unpacking,
// the larger part, still runs alongside the next import.
func (d *Daemon) importArchive(ctx context.Context, path string) error {
	d.importing.Lock()
	defer d.importing.Unlock()

	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("containerd: image archive: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only

	if _, err := d.client.Import(ctx, f); err != nil {
		return fmt.Errorf("containerd: importing %s: %w", path, err)
	}

	return nil
}
