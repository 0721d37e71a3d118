package node

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/resources"
)

// A panicking handler on each of machined's socket servers, built by the
// constructors listen uses, answers Internal with a reference that is in
// the log line with the stack, and the next call is served.
func TestSocketServersRecoverPanics(t *testing.T) {
	tests := []struct {
		name  string
		build func(*slog.Logger) *grpc.Server
	}{
		{name: "machined.sock", build: func(log *slog.Logger) *grpc.Server { return newAPIServer(log, nil) }},
		{name: "resource socket", build: func(log *slog.Logger) *grpc.Server {
			return newResourceServer("apid.sock", resources.NewServer(resources.NewStore(), resources.APIDView, resources.NewMembers()), log)
		}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs logtest.Sink

			srv := tt.build(logs.Logger())
			recovertest.Register(srv)

			conn := serveBufconn(t, srv)
			// The test-only methods are in no rule, so admin-only on
			// machined.sock.
			ctx := metadata.AppendToOutgoingContext(t.Context(), wire.MetadataRole, string(role.Admin))

			recovertest.Check(ctx, t, conn, logs.String)
		})
	}
}

// serveBufconn serves srv in memory and dials it, plaintext unless opts
// give other credentials.
func serveBufconn(t *testing.T, srv *grpc.Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()

	lis := bufconn.Listen(1 << 16)

	go func() { _ = srv.Serve(lis) }()

	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufconn", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	return conn
}

// machined.sock answers the health service without roles, from the
// machine status, and still refuses everything else without them.
func TestAPISocketHealthWithoutRoles(t *testing.T) {
	srv := newAPIServer(slog.New(slog.DiscardHandler), nil)
	h := newHealth()
	healthpb.RegisterHealthServer(srv, h)
	recovertest.Register(srv)

	conn := serveBufconn(t, srv)
	client := healthpb.NewHealthClient(conn)

	for _, tt := range []struct {
		ready bool
		want  healthpb.HealthCheckResponse_ServingStatus
	}{
		{ready: false, want: healthpb.HealthCheckResponse_NOT_SERVING},
		{ready: true, want: healthpb.HealthCheckResponse_SERVING},
		{ready: false, want: healthpb.HealthCheckResponse_NOT_SERVING},
	} {
		setHealth(h, tt.ready)

		for _, service := range []string{"", machine.MachineService_ServiceDesc.ServiceName} {
			resp, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
			if err != nil || resp.GetStatus() != tt.want {
				t.Fatalf("ready=%v: Check(%q) = %v, %v; want %v", tt.ready, service, resp.GetStatus(), err, tt.want)
			}
		}
	}

	_, err := testpb.NewTestServiceClient(conn).UnaryCall(t.Context(), &testpb.SimpleRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a call without roles got %v, want PermissionDenied", err)
	}
}
