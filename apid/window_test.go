package apid_test

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
)

// TestCallsDrawNoPing: calls made one after the other cost apid no PING of
// its own. With windows that gRPC's bandwidth estimator grows, apid would
// ping its client on the first request data after each answered ping;
// apid's fixed windows turn the estimator off.
func TestCallsDrawNoPing(t *testing.T) {
	p := apidtest.NewPKI(t)
	n := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})

	var pings h2ping.Counter

	conn, err := grpc.NewClient(n.Addr, grpc.WithTransportCredentials(pings.Credentials(credentials.NewTLS(p.ClientTLS(t, p.Client(t, role.Admin))))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	mc := machine.NewMachineServiceClient(conn)

	for range 5 {
		if _, err = mc.Version(testCtx(t), &emptypb.Empty{}); err != nil {
			t.Fatalf("Version: %v", err)
		}
	}

	if got, err := pings.Pings(); got != 0 || err != nil {
		t.Fatalf("apid sent %d pings over 5 calls (frames read: %v)", got, err)
	}
}
