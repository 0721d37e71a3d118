package grpcopt_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/grpcopt"
)

// remotes is a listener that reports the address of each connection it
// accepts.
type remotes struct {
	net.Listener
	seen chan string
}

func (l remotes) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		l.seen <- host
	}

	return c, err
}

// TestDialFrom calls a server from a chosen loopback address, and from the
// one the system chooses when none is given.
func TestDialFrom(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	l := remotes{Listener: lis, seen: make(chan string, 4)}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())

	go func() { _ = srv.Serve(l) }()

	t.Cleanup(srv.Stop)

	for _, tt := range []struct{ source, want string }{{"127.0.0.2", "127.0.0.2"}, {"", "127.0.0.1"}} {
		conn, err := grpc.NewClient(lis.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpcopt.DialFrom(tt.source))
		if err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)

		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})

		cancel()
		_ = conn.Close()

		if err != nil {
			t.Fatalf("source %q: %v", tt.source, err)
		}

		if got := <-l.seen; got != tt.want {
			t.Fatalf("source %q: the server saw %s, want %s", tt.source, got, tt.want)
		}
	}
}
