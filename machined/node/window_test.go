package node

import (
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
	"github.com/aegis-os/aegis/internal/wire"
)

// TestAPISocketSendsNoPing: calls made one after the other on machined's
// API socket cost machined no PING of its own; its fixed windows turn off
// gRPC's bandwidth estimator, which would ping apid on the first request
// data after each answered ping.
func TestAPISocketSendsNoPing(t *testing.T) {
	var pings h2ping.Counter

	conn := serveBufconn(t, newAPIServer(slog.New(slog.DiscardHandler), nil),
		grpc.WithTransportCredentials(pings.Credentials(insecure.NewCredentials())))
	ctx := metadata.AppendToOutgoingContext(t.Context(), wire.MetadataRole, string(role.Admin))

	// No service is registered: each call carries its request and is
	// answered Unimplemented, which is all the transport needs.
	for range 5 {
		_ = conn.Invoke(ctx, "/machine.MachineService/Version", &emptypb.Empty{}, &emptypb.Empty{})
	}

	if got, err := pings.Pings(); got != 0 || err != nil {
		t.Fatalf("machined sent %d pings over 5 calls (frames read: %v)", got, err)
	}
}
