// Package unixsock opens the Unix sockets of a node's services: mode 0600 in
// a directory of mode 0700, so only the node's owner reaches them.
package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// MaxPathLength is the longest socket path Linux accepts: sun_path holds
// 108 bytes including the terminating NUL.
const MaxPathLength = 107

// Listen listens on a Unix socket at path. The parent directory is created
// (or tightened) to 0700 first, so the moment between creating the socket
// and tightening it to 0600 exposes nothing; a socket left by a process
// that died is removed.
func Listen(path string) (net.Listener, error) {
	if len(path) > MaxPathLength {
		return nil, fmt.Errorf("unixsock: %s is %d bytes, longer than a Unix socket path may be (%d): use a shorter state directory", path, len(path), MaxPathLength)
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("unixsock: %w", err)
	}

	// MkdirAll keeps an existing directory's mode; the socket's safety
	// rests on this one's.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("unixsock: %w", err)
	}

	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("unixsock: %w", err)
	}

	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("unixsock: %w", err)
	}

	if err = os.Chmod(path, 0o600); err != nil {
		lis.Close()

		return nil, fmt.Errorf("unixsock: tightening %s: %w", path, err)
	}

	return lis, nil
}
