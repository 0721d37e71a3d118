// Package logfile is an append-only log file that rotates by size and
// keeps a fixed number of older files: path, path.1 (the newest older
// one) … path.N. Each Write is kept whole in one file, so a log handler
// that writes one record per call never has a record split by a rotation.
// Commit waits until what was written is on disk, sharing one sync among
// the writers that wait at once (group commit).
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

	// group runs the syncs of Commit.
	group *groupCommit
}

// Open opens (appending to) the log at path, mode 0600, in a 0700
// directory it creates if needed. Once the file would grow past maxSize it
// is rotated; keep older files are kept, the oldest removed.
func Open(path string, maxSize int64, keep int) (*File, error) {
	return open(path, maxSize, keep, newGroupCommit(syncFile))
}

func open(path string, maxSize int64, keep int, group *groupCommit) (*File, error) {
	if maxSize <= 0 || keep < 0 {
		return nil, fmt.Errorf("logfile: %s: size %d and count %d of the rotation must be positive", path, maxSize, keep)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("logfile: %w", err)
	}

	l := &File{path: path, maxSize: maxSize, keep: keep, group: group}
	group.cond.L = &l.mu

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

	// The file's name must survive a crash as well as what Commit synced.
	return syncDir(filepath.Dir(l.path))
}

// Write appends p, rotating first if p would take the file past its bound.
// It returns once the kernel has p; Commit waits for the disk.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	// A rotation closes the file: a sync in flight on it ends first.
	for l.group.syncing && l.full(len(p)) {
		l.group.cond.Wait()
	}

	if l.f == nil {
		return 0, errors.New("logfile: closed")
	}

	if l.full(len(p)) {
		// Writers waiting in Commit wrote to this file: it is synced
		// for them before it is closed, and they get the sync's error.
		l.group.settleLocked(l.f)

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
			l.group.dirty = true

			return n, err
		}
	}

	n, err := l.f.Write(p)
	l.size += int64(n)
	l.group.dirty = true

	if err != nil {
		return n, fmt.Errorf("logfile: %w", err)
	}

	return n, nil
}

// full reports whether n more bytes would take the file past its bound.
func (l *File) full(n int) bool {
	return l.size > 0 && l.size+int64(n) > l.maxSize
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

	for l.group.syncing {
		l.group.cond.Wait()
	}

	if l.f == nil {
		return nil
	}

	l.group.settleLocked(l.f)

	err := l.f.Close()
	l.f = nil

	return err
}

// Commit returns once everything written to the file before the call is
// on disk, or with the error that kept it from there. Callers that wait
// at the same time share one sync: a record costs about one sync's
// latency, not a sync apiece.
func (l *File) Commit() error {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.f == nil {
		return errors.New("logfile: closed")
	}

	return l.group.waitLocked(l)
}
