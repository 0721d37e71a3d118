package apid_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logtest"
)

// TestMemberNameNeedsTheNamedPeer: a member's hostname routes to its
// address only if the peer there proves both: a certificate naming the
// address but another name (a stale or squatted entry), or the name but
// another address, is refused in the handshake, before the call's first
// byte, with an error naming the node and no dial detail.
func TestMemberNameNeedsTheNamedPeer(t *testing.T) {
	p, nodes := cluster(t, 3)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	// cp-9's entry points at node-b, whose certificate names node-b only.
	p.AddMember("cp-9", nodes[1].IP, apid.RoleControlPlane)
	// node-c's certificate names node-c and an address it does not hold.
	other := p.Server(t, "127.0.9.9", "node-c")
	if err := nodes[2].Certificate.Set(other.CertPEM, other.KeyPEM); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"cp-9", "node-c"} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Version(client.WithNode(testCtx(t), name))

			st := status.Convert(err)
			if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "node "+name+" unreachable: the peer at its address does not prove to be "+name) ||
				strings.Contains(st.Message(), "x509") || strings.Contains(st.Message(), "handshake") {
				t.Fatalf("Version on %s: %v, want Unavailable naming the node, without dial detail", name, err)
			}
		})
	}

	for _, n := range nodes[1:] {
		if calls := n.Backend.CallsTo("/machine.MachineService/Version"); len(calls) != 0 {
			t.Errorf("%s served %d calls meant for another node", n.IP, len(calls))
		}
	}

	// The node itself, named by its proven name, is reached.
	p.AddMember("node-b", nodes[1].IP, apid.RoleControlPlane)

	if _, err := c.Version(client.WithNode(testCtx(t), "node-b")); err != nil {
		t.Fatalf("Version on node-b: %v", err)
	}
}

// TestAddressTargetIsAClusterNode: an address that is not this node, a
// control-plane endpoint or a live member is refused Unavailable naming
// it (a node rejoining is retried), and never dialed, even where
// something listens; in a fan-out the other nodes still answer.
func TestAddressTargetIsAClusterNode(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	lis, stranger := p.Listen(t, "127.0.2.240")
	t.Cleanup(func() { lis.Close() })

	var accepted atomic.Int32

	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}

			accepted.Add(1)
			conn.Close()
		}
	}()

	for _, target := range []string{stranger, "127.0.0.1", "::1", "169.254.169.254"} {
		t.Run(target, func(t *testing.T) {
			_, err := c.Version(client.WithNode(testCtx(t), target))

			st := status.Convert(err)
			if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), `node "`+target+`" is neither this node`) {
				t.Fatalf("Version on %s: %v, want Unavailable naming it", target, err)
			}
		})
	}

	resp, err := c.MachineClient.Version(client.WithNodes(testCtx(t), nodes[0].IP, stranger), &emptypb.Empty{})
	if err != nil {
		t.Fatalf("Version on nodes with a stranger: %v", err)
	}

	if got := fanOutOutcomes(resp.GetMessages()); got[nodes[0].IP] != "ok" ||
		!strings.HasPrefix(got[stranger], "Unavailable: ") || !strings.Contains(got[stranger], "is neither this node") {
		t.Fatalf("Version on nodes with a stranger: %v, want %s ok and %s refused Unavailable", got, nodes[0].IP, stranger)
	}

	if n := accepted.Load(); n != 0 {
		t.Fatalf("the stranger's listener accepted %d connections", n)
	}
}

// A control plane's and a worker's machine configs, as far as apid reads
// them.
var (
	controlPlaneConfig = []byte("version: v1alpha1\nmachine:\n  type: controlplane\n  ca:\n    key: c2VjcmV0\n")
	workerConfig       = []byte("version: v1alpha1\nmachine:\n  type: worker\n  token: abcdef.0123456789abcdef\n")
)

const applyMethod = "/machine.MachineService/ApplyConfiguration"

// TestSecretsGoOnlyToTheirRole: an ApplyConfiguration is refused before it
// is sent to a node whose proven role is not the config's, with
// FailedPrecondition naming both; a node whose role nothing proves gets
// none; a fan-out refuses each such node in its own entry; the local node
// checks its own role.
func TestSecretsGoOnlyToTheirRole(t *testing.T) {
	p := apidtest.NewPKI(t)
	log := &logtest.Sink{}
	cp := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "cp-1", Logger: log.Logger()})
	worker := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "worker-1", Worker: true})
	unproven := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "odd-1"})
	p.AddMember("odd-1", unproven.IP, "")

	admin := p.ClientTLS(t, p.Client(t, role.Admin))
	c := apidtest.TalosClient(t, cp.Addr, admin)

	apply := func(data []byte) *machine.ApplyConfigurationRequest {
		return &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT}
	}

	tests := []struct {
		name, node string
		data       []byte
		want       string
	}{
		{"controlplane config to a worker", "worker-1", controlPlaneConfig,
			"apid: node worker-1 is a worker; the configuration is for a controlplane: refused, it carries the cluster's CA keys"},
		{"controlplane config to a worker by address", worker.IP, controlPlaneConfig,
			"apid: node " + worker.IP + " is a worker; the configuration is for a controlplane"},
		{"worker config to a control plane", "cp-1", workerConfig,
			"apid: node cp-1 is a controlplane; the configuration is for a worker: refused, it carries the cluster's join token"},
		{"controlplane config to a node of no proven role", "odd-1", controlPlaneConfig,
			"apid: node odd-1 has no proven role; the configuration is for a controlplane"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ApplyConfiguration(client.WithNode(testCtx(t), tt.node), apply(tt.data))

			st := status.Convert(err)
			if st.Code() != codes.FailedPrecondition || !strings.HasPrefix(st.Message(), tt.want) {
				t.Fatalf("ApplyConfiguration: %v, want FailedPrecondition %q", err, tt.want)
			}
		})
	}

	t.Run("fan-out refuses per node", func(t *testing.T) {
		_, err := c.ApplyConfiguration(client.WithNodes(testCtx(t), cp.IP, worker.IP, unproven.IP), apply(controlPlaneConfig))

		got := nodeErrors(t, err)
		if got[cp.IP] != codes.Unimplemented || got[worker.IP] != codes.FailedPrecondition || got[unproven.IP] != codes.FailedPrecondition {
			t.Fatalf("entries %v: want the control plane served (Unimplemented here), the others FailedPrecondition", got)
		}
	})

	t.Run("the local node checks its own role", func(t *testing.T) {
		wc := apidtest.TalosClient(t, worker.Addr, admin)

		_, err := wc.ApplyConfiguration(testCtx(t), apply(controlPlaneConfig))
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.HasPrefix(st.Message(), "apid: this node is a worker") {
			t.Fatalf("local ApplyConfiguration on the worker: %v", err)
		}
	})

	t.Run("a config whose type cannot be read", func(t *testing.T) {
		_, err := c.ApplyConfiguration(client.WithNode(testCtx(t), cp.IP), apply([]byte("machine: [")))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("ApplyConfiguration of unreadable YAML: %v, want InvalidArgument", err)
		}
	})

	for _, n := range []*apidtest.Node{worker, unproven} {
		if calls := n.Backend.CallsTo(applyMethod); len(calls) != 0 {
			t.Errorf("%s received %d ApplyConfiguration calls", n.IP, len(calls))
		}
	}

	if calls := cp.Backend.CallsTo(applyMethod); len(calls) != 1 {
		t.Errorf("the control plane received %d ApplyConfiguration calls, want the fan-out's one", len(calls))
	}

	// One record per node kept from the secrets: four single calls, two
	// nodes of the fan-out.
	if recs := log.Find(t, "call carrying secrets refused", "grpc.method", applyMethod); len(recs) != 6 {
		t.Errorf("%d records of refused secrets, want 6:\n%s", len(recs), log.String())
	}

	if log.First(t, "call carrying secrets refused", "node", "odd-1", "node_role", "unproven", "secrets_for", "controlplane") == nil {
		t.Errorf("no record naming odd-1 as unproven:\n%s", log.String())
	}

	if len(log.Find(t, "node call failed", "grpc.code", "FailedPrecondition")) != 0 {
		t.Errorf("a refusal logged twice:\n%s", log.String())
	}
}

// fanOutOutcomes reads a fan-out's replies: each node's "ok", or its
// error entry's code and message.
func fanOutOutcomes(msgs []*machine.Version) map[string]string {
	got := map[string]string{}

	for _, m := range msgs {
		md := m.GetMetadata()
		if md.GetError() == "" {
			got[md.GetHostname()] = "ok"
		} else {
			got[md.GetHostname()] = codes.Code(md.GetStatus().GetCode()).String() + ": " + md.GetError()
		}
	}

	return got
}
