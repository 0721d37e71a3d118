// Package atomicfile writes files so that a reader sees either the old
// content or the new, never a torn write, and so that an existing file is
// never replaced by accident.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Write stores data at path with mode perm. The data is written to a temporary
// file in the same directory, synced, and then moved into place: with Overwrite
// by rename, without it by a hard link that fails if path already exists, so
// two writers never both win.
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

	tmp, err := writeTemp(dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) //nolint:errcheck // already moved into place on success

	if opts.Overwrite {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("atomicfile: %s: %w", path, ErrExists)
		}
	}

	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}

	return syncDir(dir)
}

func writeTemp(dir, base string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("atomicfile: %w", err)
	}

	name := f.Name()
	fail := func(err error) (string, error) {
		f.Close()       //nolint:errcheck // the write already failed
		os.Remove(name) //nolint:errcheck // best effort cleanup of our own temp file

		return "", fmt.Errorf("atomicfile: %w", err)
	}

	// Chmod before writing so secret content is never readable under a wider mode.
	if err = f.Chmod(perm); err != nil {
		return fail(err)
	}

	if _, err = f.Write(data); err != nil {
		return fail(err)
	}

	if err = f.Sync(); err != nil {
		return fail(err)
	}

	if err = f.Close(); err != nil {
		os.Remove(name) //nolint:errcheck // best effort cleanup of our own temp file

		return "", fmt.Errorf("atomicfile: %w", err)
	}

	return name, nil
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
