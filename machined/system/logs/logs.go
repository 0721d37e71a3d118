// Package logs keeps a service's output: appended to a file that is rotated
// once it passes a size bound (one older file kept), readable as its last N
// lines and followable as it grows.
package logs

import (
	"errors"
	"sync"

	"github.com/aegis-os/aegis/internal/logfile"
)

// Log is one service's output. It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	path    string
	file    *logfile.File
	closed  bool
	size    int64         // of the current file
	gen     uint64        // rotations so far
	changed chan struct{} // closed and replaced on every write and rotation
}

// Position is a place in the log to follow from.
type Position struct {
	gen    uint64
	offset int64
}

// Open opens (appending to) the log at path, mode 0600, rotating it to
// path+".1" whenever it grows past maxSize (internal/logfile, one older
// file kept).
func Open(path string, maxSize int64) (*Log, error) {
	f, err := logfile.Open(path, maxSize, 1)
	if err != nil {
		return nil, err
	}

	gen, size := f.Position()

	return &Log{path: path, file: f, size: size, gen: gen, changed: make(chan struct{})}, nil
}

// Write appends p, rotating first if p would take the file past its bound.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		return 0, errors.New("logs: closed")
	}

	n, err := l.file.Write(p)
	l.gen, l.size = l.file.Position()
	l.notifyLocked()

	return n, err
}

func (l *Log) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close closes the file; followers see the end of the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		return nil
	}

	l.closed = true
	err := l.file.Close()
	l.notifyLocked()

	return err
}
