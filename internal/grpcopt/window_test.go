package grpcopt_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
)

// TestFixedWindowsSendNoPing: calls one after the other on a client with
// FixedWindows cost the server no PING from the client; with gRPC's
// defaults the client pings after its first answer.
func TestFixedWindowsSendNoPing(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []grpc.DialOption
		wantPings bool
	}{
		{name: "fixed windows", opts: grpcopt.FixedWindows()},
		{name: "gRPC's defaults", wantPings: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var pings h2ping.Counter

			srv := grpc.NewServer(grpc.Creds(pings.ServerCredentials(insecure.NewCredentials())))
			healthpb.RegisterHealthServer(srv, health.NewServer())

			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}

			go func() { _ = srv.Serve(lis) }()

			t.Cleanup(srv.Stop)

			conn, err := grpc.NewClient(lis.Addr().String(),
				append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}

			for range 5 {
				if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
					t.Fatalf("Check: %v", err)
				}
			}

			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}

			srv.GracefulStop()

			got, err := pings.Pings()
			if err != nil {
				t.Fatalf("reading the client's frames: %v", err)
			}

			if tt.wantPings != (got > 0) {
				t.Fatalf("the client sent %d pings over 5 calls", got)
			}
		})
	}
}
