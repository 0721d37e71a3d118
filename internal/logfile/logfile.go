// Package logfile is an append-only log file that rotates by size and
// keeps a fixed number of older files: path, path.1 (the newest older
// one) … path.N. Each Write is kept whole in one file, so a log handler
// that writes one record per call never has a record split by a rotation.
package logfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// File is one rotating log file. It is safe for concurrent use.
type File struct {
	path    string
	maxSize int64
	keep    int

	mu        sync.Mutex
	f         *os.File
	size      int64
	rotations uint64 // since Open
}

// Open opens (appending to) the log at path, mode 0600, in a 0700
// directory it creates if needed. Once the file would grow past maxSize it
// is rotated; keep older files are kept, the oldest removed.
func Open(path string, maxSize int64, keep int) (*File, error) {
	if maxSize <= 0 || keep < 0 {
		return nil, fmt.Errorf("logfile: %s: size %d and count %d of the rotation must be positive", path, maxSize, keep)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("logfile: %w", err)
	}

	l := &File{path: path, maxSize: maxSize, keep: keep}
	if err := l.open(os.O_APPEND); err != nil {
		return nil, err
	}

	return l, nil
}

func (l *File) open(flag int) error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|flag, 0o600)
	if err != nil {
		return fmt.Errorf("logfile: %w", err)
	}

	st, err := f.Stat()
	if err != nil {
		f.Close() //nolint:errcheck // already failing

		return fmt.Errorf("logfile: %w", err)
	}

	l.f, l.size = f, st.Size()

	return nil
}

// Write appends p, rotating first if p would take the file past its bound.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.f == nil {
		return 0, errors.New("logfile: closed")
	}

	if l.size > 0 && l.size+int64(len(p)) > l.maxSize {
		if err := l.rotateLocked(); err != nil {
			// A log that cannot rotate keeps growing rather than losing
			// records; the error is returned once, with this write.
			if l.f == nil {
				if rerr := l.open(os.O_APPEND); rerr != nil {
					return 0, errors.Join(err, rerr)
				}
			}

			n, _ := l.f.Write(p)
			l.size += int64(n)

			return n, err
		}
	}

	n, err := l.f.Write(p)
	l.size += int64(n)

	if err != nil {
		return n, fmt.Errorf("logfile: %w", err)
	}

	return n, nil
}

// rotateLocked shifts path.i to path.i+1 (dropping path.keep) and path to
// path.1, then starts an empty path.
func (l *File) rotateLocked() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("logfile: %w", err)
	}

	l.f = nil

	if l.keep == 0 {
		l.rotations++

		return l.open(os.O_TRUNC)
	}

	if err := os.Remove(l.name(l.keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logfile: rotating: %w", err)
	}

	for i := l.keep - 1; i >= 0; i-- {
		if err := os.Rename(l.name(i), l.name(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logfile: rotating: %w", err)
		}
	}

	l.rotations++

	return l.open(os.O_TRUNC)
}

// Position returns how many times the file was rotated since Open and the
// size of the current file: where a reader that follows the log stands.
func (l *File) Position() (rotations uint64, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.rotations, l.size
}

// name is the file of generation i: path itself for 0.
func (l *File) name(i int) string {
	if i == 0 {
		return l.path
	}

	return l.path + "." + strconv.Itoa(i)
}

// Paths returns the files of the log, oldest first, whether they exist or not.
func (l *File) Paths() []string {
	out := make([]string, 0, l.keep+1)
	for i := l.keep; i >= 0; i-- {
		out = append(out, l.name(i))
	}

	return out
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.f == nil {
		return nil
	}

	err := l.f.Close()
	l.f = nil

	return err
}
