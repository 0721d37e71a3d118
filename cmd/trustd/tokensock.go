package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/trustd/tokenapi"
)

// tokenSocket serves the TokenService on a Unix socket only the node's
// owner can reach: the socket is 0600 inside a 0700 directory, so the
// window between creating and tightening it exposes nothing.
type tokenSocket struct {
	lis  net.Listener
	grpc *grpc.Server
}

func listenTokenSocket(path string, api *tokenapi.Service) (*tokenSocket, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	// MkdirAll keeps an existing directory's mode; the socket's safety
	// rests on this one's.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}

	// A socket left by a process that died is in the way of a new one.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}

	if err = os.Chmod(path, 0o600); err != nil {
		lis.Close()

		return nil, fmt.Errorf("tightening %s: %w", path, err)
	}

	s := grpc.NewServer()
	tokens.RegisterTokenServiceServer(s, api)

	return &tokenSocket{lis: lis, grpc: s}, nil
}

// serve runs until ctx ends, then drains calls in flight.
func (t *tokenSocket) serve(ctx context.Context) error {
	served := make(chan error, 1)

	go func() { served <- t.grpc.Serve(t.lis) }()

	select {
	case err := <-served:
		return fmt.Errorf("token socket: %w", err)
	case <-ctx.Done():
		t.grpc.GracefulStop()
		<-served

		return nil
	}
}
