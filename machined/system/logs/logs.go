// Package logs keeps a service's output: appended to a file that is rotated
// once it passes a size bound (one older file kept), readable as its last N
// lines and followable as it grows.
package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Log is one service's output. It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	path    string
	maxSize int64
	f       *os.File
	size    int64
	gen     uint64        // rotations so far
	changed chan struct{} // closed and replaced on every write and rotation
}

// Position is a place in the log to follow from.
type Position struct {
	gen    uint64
	offset int64
}

// Open opens (appending to) the log at path, mode 0600, rotating it to
// path+".1" whenever it grows past maxSize.
func Open(path string, maxSize int64) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}

	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}

	st, err := f.Stat()
	if err != nil {
		f.Close() //nolint:errcheck // already failing

		return nil, fmt.Errorf("logs: %w", err)
	}

	return &Log{path: path, maxSize: maxSize, f: f, size: st.Size(), changed: make(chan struct{})}, nil
}

// Write appends p, rotating first if p would take the file past its bound.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.f == nil {
		return 0, errors.New("logs: closed")
	}

	if l.size > 0 && l.size+int64(len(p)) > l.maxSize {
		if err := l.rotateLocked(); err != nil {
			return 0, err
		}
	}

	n, err := l.f.Write(p)
	l.size += int64(n)
	l.notifyLocked()

	if err != nil {
		return n, fmt.Errorf("logs: %w", err)
	}

	return n, nil
}

func (l *Log) rotateLocked() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}

	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("logs: rotating: %w", err)
	}

	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		l.f = nil

		return fmt.Errorf("logs: %w", err)
	}

	l.f, l.size = f, 0
	l.gen++

	return nil
}

func (l *Log) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close closes the file; followers see the end of the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.f == nil {
		return nil
	}

	err := l.f.Close()
	l.f = nil
	l.notifyLocked()

	return err
}
