package apid_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
)

// testIP is the loopback address of apid's in-process tests; every
// listener takes port 0 on it.
const testIP = "127.0.2.10"

// callTimeout bounds each call of a test: generous, for a busy machine.
const callTimeout = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)

	return ctx
}

// cluster starts n nodes sharing one PKI.
func cluster(t *testing.T, n int) (*apidtest.PKI, []*apidtest.Node) {
	t.Helper()

	p := apidtest.NewPKI(t)
	nodes := make([]*apidtest.Node, n)

	for i := range nodes {
		nodes[i] = apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "node-" + string(rune('a'+i))})
	}

	return p, nodes
}

func TestVersionLocal(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	resp, err := c.Version(testCtx(t))
	if err != nil {
		t.Fatalf("Version: %v", err)
	}

	if len(resp.Messages) != 1 || resp.Messages[0].GetVersion().GetTag() != apidtest.VersionTag ||
		resp.Messages[0].GetMetadata().GetHostname() != "node-a" {
		t.Fatalf("reply %v", resp)
	}

	calls := nodes[0].Backend.CallsTo(machine.MachineService_Version_FullMethodName)
	if len(calls) != 1 || !slices.Equal(calls[0].Roles, []string{"os:admin"}) {
		t.Fatalf("backend saw %+v", calls)
	}
}

func TestNodeRoutesToOneNode(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Operator)))

	resp, err := c.MachineClient.Hostname(client.WithNode(testCtx(t), nodes[1].IP), &emptypb.Empty{})
	if err != nil {
		t.Fatalf("Hostname: %v", err)
	}

	if len(resp.Messages) != 1 || resp.Messages[0].GetHostname() != "node-b" {
		t.Fatalf("reply %v", resp)
	}

	if len(nodes[0].Backend.Calls()) != 0 {
		t.Fatalf("the entry node's machined was called: %+v", nodes[0].Backend.Calls())
	}

	calls := nodes[1].Backend.Calls()
	if len(calls) != 1 || !slices.Equal(calls[0].Roles, []string{"os:operator"}) {
		t.Fatalf("the target saw %+v", calls)
	}

	for _, k := range []string{"node", "nodes"} {
		if v := calls[0].Metadata.Get(k); len(v) != 0 {
			t.Fatalf("routing metadata %s=%v reached the target's machined", k, v)
		}
	}
}

func TestNodesMergesReplies(t *testing.T) {
	p, nodes := cluster(t, 3)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	targets := []string{nodes[0].IP, nodes[1].IP, nodes[2].IP}

	resp, err := c.MachineClient.Hostname(client.WithNodes(testCtx(t), targets...), &emptypb.Empty{})
	if err != nil {
		t.Fatalf("Hostname: %v", err)
	}

	if len(resp.Messages) != 3 {
		t.Fatalf("%d replies, want 3: %v", len(resp.Messages), resp)
	}

	for i, m := range resp.Messages {
		if m.GetMetadata().GetHostname() != targets[i] || m.GetHostname() != "node-"+string(rune('a'+i)) {
			t.Errorf("reply %d: metadata %v, hostname %q", i, m.GetMetadata(), m.GetHostname())
		}
	}

	for i, n := range nodes {
		calls := n.Backend.Calls()
		if len(calls) != 1 || !slices.Equal(calls[0].Roles, []string{"os:reader"}) {
			t.Errorf("node %d saw %+v", i, calls)
		}
	}
}

func TestReaderCannotRestart(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	_, err := c.ServiceRestart(testCtx(t), "apid")

	st, _ := status.FromError(err)
	if st.Code() != codes.PermissionDenied {
		t.Fatalf("ServiceRestart as reader: %v", err)
	}

	if len(nodes[0].Backend.Calls()) != 0 {
		t.Fatal("a refused call reached machined")
	}
}
