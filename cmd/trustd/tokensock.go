package main

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/unixsock"
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
	lis, err := unixsock.Listen(path)
	if err != nil {
		return nil, err
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
