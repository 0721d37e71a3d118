// Package logs keeps a service's output: appended to a file that is rotated
// once it passes a size bound (one older file kept), readable as its last N
// lines and followable as it grows.
package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// Tail returns the last n lines (all of them for n < 0) and the position
// just past them, to follow from.
func (l *Log) Tail(n int) ([]byte, Position, error) {
	l.mu.Lock()
	pos := Position{gen: l.gen, offset: l.size}
	l.mu.Unlock()

	old, err := readRange(l.path+".1", 0, -1)
	if err != nil {
		return nil, pos, err
	}

	cur, err := readRange(l.path, 0, pos.offset)
	if err != nil {
		return nil, pos, err
	}

	return lastLines(append(old, cur...), n), pos, nil
}

// Follow sends everything written after pos, as it is written, until ctx
// ends or the log is closed. Output lost to rotations while the follower
// lagged is skipped.
func (l *Log) Follow(ctx context.Context, pos Position, send func([]byte) error) error {
	for {
		l.mu.Lock()
		gen, size, changed, closed := l.gen, l.size, l.changed, l.f == nil
		l.mu.Unlock()

		data, next, err := l.readFrom(pos, gen, size)
		if err != nil {
			return err
		}

		pos = next

		if len(data) > 0 {
			if err := send(data); err != nil {
				return err
			}

			continue
		}

		if closed {
			return nil
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readFrom reads what lies between pos and the end (gen, size).
func (l *Log) readFrom(pos Position, gen uint64, size int64) ([]byte, Position, error) {
	switch {
	case pos.gen == gen:
		data, err := readRange(l.path, pos.offset, size)

		return data, Position{gen: gen, offset: pos.offset + int64(len(data))}, err
	case pos.gen+1 == gen:
		// The file we were reading is now path.1: finish it, then move on.
		data, err := readRange(l.path+".1", pos.offset, -1)

		return data, Position{gen: gen}, err
	default:
		return nil, Position{gen: gen}, nil
	}
}

// readRange reads path from offset up to end (-1: to EOF); a missing file is empty.
func readRange(path string, offset, end int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}

	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only

	if _, err = f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}

	var r io.Reader = f
	if end >= 0 {
		r = io.LimitReader(f, max(end-offset, 0))
	}

	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}

	return data, nil
}

// lastLines returns the last n lines of data (all for n < 0).
func lastLines(data []byte, n int) []byte {
	switch {
	case n < 0:
		return data
	case n == 0:
		return nil
	}

	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}

	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}

	if n > 0 {
		return data
	}

	return nil
}
