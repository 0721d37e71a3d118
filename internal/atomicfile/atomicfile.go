// Package atomicfile writes files so that a reader sees either the old
// content or the new, never a torn write, and so that an existing file is
// never replaced by accident.
//
// The temporary file, its mode and the rename are github.com/google/renameio/v2's.
// This package stays as a thin layer over it for what renameio lacks:
//   - create-only writes: without Overwrite the file is moved into place by a
//     hard link, which fails if the target exists, so of two writers exactly
//     one wins (renameio only replaces);
//   - durability of the name: the directory is synced after the rename or
//     link (renameio syncs the file, not the directory entry), so a power cut
//     does not lose a key that a caller was told is written;
//   - parent directories created with a private mode (0o700 by default);
//   - the temporary file always in the target's directory: renameio would
//     otherwise probe os.TempDir and may stage a secret there.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// ErrExists is returned when the target exists and overwriting was not asked for.
var ErrExists = errors.New("file exists")

// Options control one write. The zero value refuses to replace an existing file.
type Options struct {
	// Overwrite allows replacing an existing file.
	Overwrite bool
	// DirPerm is the mode of parent directories created on the way; zero means 0o700.
	DirPerm fs.FileMode
}

// Write stores data at path with mode perm, whatever the umask. The data is
// written to a temporary file in the same directory, created with mode perm
// before any byte is written, synced, and then moved into place: with
// Overwrite by rename, without it by a hard link that fails if path already
// exists, so two writers never both win. The directory is synced last.
func Write(path string, data []byte, perm fs.FileMode, opts Options) error {
	dirPerm := opts.DirPerm
	if dirPerm == 0 {
		dirPerm = 0o700
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}

	if !opts.Overwrite {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("atomicfile: %s: %w", path, ErrExists)
		}
	}

	// The temporary file is created 0o600 and chmodded to perm before the
	// write, so secret content is never readable under a wider mode.
	pending, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer pending.Cleanup() //nolint:errcheck // a no-op once renamed; else removes our own temp file

	if _, err := pending.Write(data); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}

	if err := place(pending, path, opts.Overwrite); err != nil {
		return err
	}

	return syncDir(dir)
}

// place moves the written temporary file to path: by rename when replacing
// is allowed, else by a hard link that fails if path exists.
func place(pending *renameio.PendingFile, path string, overwrite bool) error {
	if overwrite {
		if err := pending.CloseAtomicallyReplace(); err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}

		return nil
	}

	if err := pending.Sync(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}

	err := os.Link(pending.Name(), path)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("atomicfile: %s: %w", path, ErrExists)
	}

	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}

	// The deferred Cleanup closes the file and removes the temporary name.
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close() //nolint:errcheck // read-only handle

	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync %s: %w", dir, err)
	}

	return nil
}
