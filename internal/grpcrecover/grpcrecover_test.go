package grpcrecover_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/aegis-os/aegis/internal/grpcrecover"
	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/requestid"
)

func TestPanicAnsweredWithReference(t *testing.T) {
	var logs logtest.Sink

	rec := grpcrecover.New(grpcrecover.Config{Component: "test", Logger: logs.Logger()})
	srv := grpc.NewServer(rec.ServerOptions()...)
	recovertest.Register(srv)

	lis := bufconn.Listen(1 << 16)

	go func() { _ = srv.Serve(lis) }()

	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	recovertest.Check(t.Context(), t, conn, logs.String)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no randomness") }

// Without randomness the caller still gets Internal, not a second panic.
func TestPanicWithoutRandomness(t *testing.T) {
	rec := grpcrecover.New(grpcrecover.Config{Component: "test", Rand: failingReader{}})

	_, err := rec.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { panic("boom") })

	st, _ := status.FromError(err)
	if st.Code() != codes.Internal || !strings.Contains(st.Message(), "(ref "+requestid.None+")") {
		t.Fatalf("got %v", err)
	}
}
