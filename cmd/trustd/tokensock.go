package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/grpcrecover"
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

func listenTokenSocket(path string, api *tokenapi.Service, health healthService, log *slog.Logger) (*tokenSocket, error) {
	lis, err := unixsock.Listen(path)
	if err != nil {
		return nil, err
	}

	return &tokenSocket{lis: lis, grpc: newTokenServer(api, health, log)}, nil
}

// healthService serves trustd's health statuses on another server
// (trustd.Server.RegisterHealth).
type healthService interface {
	RegisterHealth(grpc.ServiceRegistrar)
}

// newTokenServer is the token socket's server: a panic in a handler
// answers Internal with a reference that is also in the log line with
// the stack, and trustd goes on serving, as on its TLS listener. It
// serves trustd's health service too, for machined's probe: on the
// listener, the probe would be an anonymous caller that a flood of them
// keeps out. A nil health serves none.
func newTokenServer(api tokens.TokenServiceServer, health healthService, log *slog.Logger) *grpc.Server {
	s := grpc.NewServer(grpcrecover.New(grpcrecover.Config{Component: "trustd", Logger: log}).ServerOptions()...)
	tokens.RegisterTokenServiceServer(s, api)

	if health != nil {
		health.RegisterHealth(s)
	}

	return s
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
