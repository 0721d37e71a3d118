package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aegis-os/aegis/internal/etcdsnap"
)

// Snapshot streams a snapshot of the local member's backend to send, in
// chunks; etcd ends it with the SHA-256 of what came before.
func (e *Etcd) Snapshot(ctx context.Context, send func([]byte) error) error {
	cli, err := e.local()
	if err != nil {
		return err
	}

	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return translate(err)
	}
	defer rc.Close() //nolint:errcheck // read side

	buf := make([]byte, snapshotChunk)

	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			if serr := send(buf[:n]); serr != nil {
				return serr
			}
		}

		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case err != nil:
			return translate(err)
		}
	}
}

// Recover keeps the snapshot that recv yields (until io.EOF) for a
// Bootstrap with recover. The snapshot is checked before it replaces an
// earlier upload: a truncated or foreign file changes nothing.
func (e *Etcd) Recover(recv func() ([]byte, error)) error {
	part := e.recoverFile() + ".part"

	if err := os.MkdirAll(e.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}

	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer os.Remove(part) //nolint:errcheck // gone after the rename

	err = receive(f, recv)
	if cerr := f.Close(); err == nil {
		err = cerr
	}

	if err != nil {
		return err
	}

	if _, err = etcdsnap.Check(part); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}

	if err = os.Rename(part, e.recoverFile()); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}

	return nil
}

func receive(w io.Writer, recv func() ([]byte, error)) error {
	var total int64

	for {
		chunk, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}

		if err != nil {
			return err
		}

		if total += int64(len(chunk)); total > MaxSnapshot {
			return fmt.Errorf("%w: larger than %d bytes", ErrBadSnapshot, int64(MaxSnapshot))
		}

		if _, err = w.Write(chunk); err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
	}
}
