package apid_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
)

// A caller without os:impersonator may send talos-role: apid ignores it
// (and logs it), so it gains nothing, and never passes it on.
func TestTalosRoleFromOrdinaryCallerGainsNothing(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})
	other := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})
	c := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	forged := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, wire.MetadataRole, string(role.Admin))
	}

	if _, err := c.ServiceRestart(forged(testCtx(t)), "apid"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("ServiceRestart with forged talos-role: %v", err)
	}

	if _, err := c.Version(forged(testCtx(t))); err != nil {
		t.Fatal(err)
	}

	if _, err := c.Version(client.WithNode(forged(testCtx(t)), other.IP)); err != nil {
		t.Fatal(err)
	}

	for _, b := range []*apidtest.Backend{node.Backend, other.Backend} {
		calls := b.Calls()
		if len(calls) != 1 || !slices.Equal(calls[0].Roles, []string{"os:reader"}) {
			t.Fatalf("machined saw %+v, want only os:reader", calls)
		}
	}

	if len(sink.Find(t, "talos-role metadata ignored: the peer is not an impersonator")) == 0 {
		t.Fatal("ignored talos-role not logged")
	}
}

// Another node's apid (os:impersonator) passes the caller's roles; its
// call is served locally whatever routing metadata it carries, so a hop
// never fans out again.
func TestImpersonatorCallIsServedLocally(t *testing.T) {
	p, nodes := cluster(t, 2)
	imp := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Impersonator(t)))

	ctx := metadata.AppendToOutgoingContext(testCtx(t), wire.MetadataRole, string(role.Operator))

	resp, err := imp.ServiceRestart(client.WithNodes(ctx, nodes[1].IP), "apid")
	if err != nil {
		t.Fatalf("impersonated operator: %v", err)
	}

	if len(resp.Messages) != 1 || len(nodes[1].Backend.Calls()) != 0 {
		t.Fatalf("a forwarded call fanned out again: %v", resp)
	}

	calls := nodes[0].Backend.CallsTo(machine.MachineService_ServiceRestart_FullMethodName)
	if len(calls) != 1 || !slices.Equal(calls[0].Roles, []string{"os:operator"}) {
		t.Fatalf("machined saw %+v", calls)
	}
}

func TestMetadataOnTheNextHop(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader, role.EtcdBackup)))

	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-request-id", "42")

	if _, err := c.Version(client.WithNodes(ctx, nodes[0].IP, nodes[1].IP)); err != nil {
		t.Fatal(err)
	}

	for i, n := range nodes {
		calls := n.Backend.Calls()
		if len(calls) != 1 {
			t.Fatalf("node %d: %d calls", i, len(calls))
		}

		md := calls[0].Metadata
		if got := md.Get("x-request-id"); len(got) != 1 || got[0] != "42" {
			t.Errorf("node %d: caller metadata lost: %v", i, md)
		}

		if !slices.Equal(md.Get(wire.MetadataRole), []string{"os:reader", "os:etcd:backup"}) {
			t.Errorf("node %d: talos-role %v", i, md.Get(wire.MetadataRole))
		}

		for _, k := range []string{wire.MetadataNode, wire.MetadataNodes} {
			if len(md.Get(k)) != 0 {
				t.Errorf("node %d: routing key %s passed on", i, k)
			}
		}
	}
}

func TestRequestLogLine(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})

	if _, err := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.Client(t, role.Admin))).Version(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	_, err := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.Client(t, role.Reader))).ServiceRestart(testCtx(t), "apid")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatal(err)
	}

	ok := sink.Find(t, "finished call", logkey.Method, "Version", logkey.Code, "OK", logkey.Roles, "os:admin")
	denied := sink.Find(t, "finished call", logkey.Method, "ServiceRestart", logkey.Code, "PermissionDenied")

	if len(ok) != 1 || len(denied) != 1 {
		t.Fatalf("request log: %v", sink.Records(t))
	}

	for _, field := range []string{logkey.Service, logkey.Peer, logkey.Duration} {
		if ok[0][field] == nil {
			t.Errorf("request log line has no %s: %v", field, ok[0])
		}
	}

	if !strings.HasPrefix(ok[0][logkey.Peer].(string), "127.") {
		t.Errorf("peer %v", ok[0][logkey.Peer])
	}

	audit := sink.Find(t, "permission denied", logkey.Method, machine.MachineService_ServiceRestart_FullMethodName)
	if len(audit) != 1 || audit[0][logkey.Roles] != "os:reader" {
		t.Fatalf("no audit record of the denial: %v", sink.Records(t))
	}
}
