package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadChunk bounds what one read of a log holds in memory: a Logs call,
// however much of the log it sends and however far its follower lags,
// holds one chunk at a time and lets it go once sent. Many follows of a
// log of MaxServiceLog then cost kilobytes each, not megabytes.
const ReadChunk = 32 << 10

// Tail returns where the last n lines start (all of the log for n < 0,
// nothing for n == 0) and where the log ends now: Copy sends what lies
// between, Follow what comes after. It reads the log backwards, one chunk
// at a time.
func (l *Log) Tail(n int) (start, end Position, err error) {
	l.mu.Lock()
	end = Position{gen: l.gen, offset: l.size}
	l.mu.Unlock()

	segs := []segment{{path: l.path, gen: end.gen, size: end.offset}}

	if end.gen > 0 {
		old, err := fileSize(l.path + ".1")
		if err != nil {
			return end, end, err
		}

		segs = append(segs, segment{path: l.path + ".1", gen: end.gen - 1, size: old})
	}

	switch {
	case n == 0:
		return end, end, nil
	case n < 0:
		return segs[len(segs)-1].start(), end, nil
	}

	return lineStart(segs, n)
}

// Copy sends what lies between from and to (positions Tail returned), a
// chunk at a time.
func (l *Log) Copy(ctx context.Context, from, to Position, send func([]byte) error) error {
	for pos := from; pos != to; {
		if err := ctx.Err(); err != nil {
			return err
		}

		data, next, err := l.readFrom(pos, to.gen, to.offset)
		if err != nil || next == pos {
			return err
		}

		if len(data) > 0 {
			if err := send(data); err != nil {
				return err
			}
		}

		pos = next
	}

	return nil
}

// Follow sends everything written after pos, as it is written, until ctx
// ends or the log is closed. Output lost to rotations while the follower
// lagged is skipped.
func (l *Log) Follow(ctx context.Context, pos Position, send func([]byte) error) error {
	for {
		l.mu.Lock()
		gen, size, changed, closed := l.gen, l.size, l.changed, l.closed
		l.mu.Unlock()

		data, next, err := l.readFrom(pos, gen, size)
		if err != nil {
			return err
		}

		moved := next != pos
		pos = next

		if len(data) > 0 {
			if err := send(data); err != nil {
				return err
			}
		}

		if moved {
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

// readFrom reads at most ReadChunk bytes of what lies between pos and the
// end (gen, size), and returns the position after them.
func (l *Log) readFrom(pos Position, gen uint64, size int64) ([]byte, Position, error) {
	switch {
	case pos.gen == gen:
		data, err := readRange(l.path, pos.offset, min(size-pos.offset, ReadChunk))

		return data, Position{gen: gen, offset: pos.offset + int64(len(data))}, err
	case pos.gen+1 == gen:
		// The file we were reading is now path.1: finish it, then move on.
		data, err := readRange(l.path+".1", pos.offset, ReadChunk)
		if err != nil || len(data) < ReadChunk {
			return data, Position{gen: gen}, err
		}

		return data, Position{gen: pos.gen, offset: pos.offset + int64(len(data))}, nil
	default:
		return nil, Position{gen: gen}, nil
	}
}

// readRange reads at most n bytes of path from offset; a missing file, or
// an offset at or past its end, is empty.
func readRange(path string, offset, n int64) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}

	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}

	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only

	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}

	n = min(n, st.Size()-offset)
	if n <= 0 {
		return nil, nil
	}

	buf := make([]byte, n)

	got, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("logs: %w", err)
	}

	return buf[:got], nil
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)

	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("logs: %w", err)
	}

	return st.Size(), nil
}
