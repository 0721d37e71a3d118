package main

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/internal/logtest"
)

// A panicking handler on the token socket's server answers Internal with
// a reference that is in the log line with the stack, and the next call
// is served.
func TestTokenSocketRecoversPanics(t *testing.T) {
	var logs logtest.Sink

	srv := newTokenServer(tokens.UnimplementedTokenServiceServer{}, logs.Logger())
	recovertest.Register(srv)

	path := filepath.Join(t.TempDir(), "tokens.sock")

	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}

	go func() { _ = srv.Serve(lis) }()

	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	recovertest.Check(t.Context(), t, conn, logs.String)
}
