package apid_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
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

// Where the tests' dead and hanging nodes are looked for: apart from the
// live nodes, which start at testIP.
const (
	deadIP      = "127.0.2.200"
	blackholeIP = "127.0.2.220"
)

// deadAddr returns a node address nothing listens on, on p's port.
func deadAddr(t *testing.T, p *apidtest.PKI) string {
	t.Helper()

	return p.DeadNode(t, deadIP)
}

// blackhole accepts connections on p's port and never answers: a node
// that hangs. It returns the node's address.
func blackhole(t *testing.T, p *apidtest.PKI) string {
	t.Helper()

	lis, ip := p.Listen(t, blackholeIP)
	p.AddMember(ip, ip, apid.RoleControlPlane) // a member that hangs

	var (
		mu    sync.Mutex
		conns []net.Conn
	)

	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}

			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()

	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()

		for _, c := range conns {
			c.Close()
		}
	})

	return ip
}

// nodeErrors returns the per-node errors of a Talos client call.
func nodeErrors(t *testing.T, err error) map[string]codes.Code {
	t.Helper()

	out := map[string]codes.Code{}

	var merr *multierror.Error
	if !errors.As(err, &merr) {
		t.Fatalf("error %v holds no node errors", err)
	}

	for _, e := range merr.Errors {
		var ne *client.NodeError
		if !errors.As(e, &ne) {
			t.Fatalf("error %v is not a node error", e)
		}

		out[ne.Node] = status.Code(ne.Err)
	}

	return out
}

func TestNodesWithDeadAndSlowNodes(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	dead, slow := deadAddr(t, p), blackhole(t, p)

	const deadline = 5 * time.Second

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	start := time.Now()
	resp, err := c.Version(client.WithNodes(ctx, nodes[0].IP, dead, nodes[1].IP, slow))

	if elapsed := time.Since(start); elapsed >= deadline {
		t.Fatalf("merged answer took %v, past the caller's deadline", elapsed)
	}

	if resp == nil || len(resp.Messages) != 2 {
		t.Fatalf("replies %v, want the two live nodes", resp)
	}

	for i, m := range resp.Messages {
		if m.GetMetadata().GetHostname() != nodes[i].IP {
			t.Errorf("reply %d from %q", i, m.GetMetadata().GetHostname())
		}
	}

	errs := nodeErrors(t, err)
	if len(errs) != 2 || errs[dead] != codes.Unavailable || errs[slow] != codes.DeadlineExceeded {
		t.Fatalf("node errors %v, want %s Unavailable and %s DeadlineExceeded", errs, dead, slow)
	}
}

func TestNodeDeadIsUnavailable(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	if _, err := c.Version(client.WithNode(testCtx(t), deadAddr(t, p))); status.Code(err) != codes.Unavailable {
		t.Fatalf("Version on a dead node: %v", err)
	}
}

func TestWorkerServesOnlyItself(t *testing.T) {
	p := apidtest.NewPKI(t)
	worker := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Worker: true})
	other := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})
	c := apidtest.TalosClient(t, worker.Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	tests := []struct {
		name string
		ctx  func(context.Context) context.Context
		code codes.Code
	}{
		{"no routing", func(ctx context.Context) context.Context { return ctx }, codes.OK},
		{"node itself", func(ctx context.Context) context.Context { return client.WithNode(ctx, worker.IP) }, codes.OK},
		{"nodes itself", func(ctx context.Context) context.Context { return client.WithNodes(ctx, worker.IP) }, codes.OK},
		{"node other", func(ctx context.Context) context.Context { return client.WithNode(ctx, other.IP) }, codes.PermissionDenied},
		{
			"nodes itself and other",
			func(ctx context.Context) context.Context { return client.WithNodes(ctx, worker.IP, other.IP) },
			codes.PermissionDenied,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.MachineClient.Version(tt.ctx(testCtx(t)), &emptypb.Empty{})
			if status.Code(err) != tt.code {
				t.Fatalf("code %v, want %v", err, tt.code)
			}

			if tt.code == codes.PermissionDenied && !strings.Contains(err.Error(), "no request forwarding") {
				t.Fatalf("refusal %v does not say why", err)
			}
		})
	}

	if len(other.Backend.Calls()) != 0 {
		t.Fatal("the worker forwarded a call")
	}
}

func TestUnimplementedNeverHangs(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	routes := map[string]func(context.Context) context.Context{
		"local": func(ctx context.Context) context.Context { return ctx },
		"node":  func(ctx context.Context) context.Context { return client.WithNode(ctx, nodes[1].IP) },
	}

	for name, route := range routes {
		t.Run(name, func(t *testing.T) {
			if err := c.Reboot(route(testCtx(t))); status.Code(err) != codes.Unimplemented {
				t.Fatalf("Reboot: %v", err)
			}

			err := c.Conn().Invoke(route(testCtx(t)), "/machine.MachineService/NoSuchMethod", &emptypb.Empty{}, &emptypb.Empty{})
			if status.Code(err) != codes.Unimplemented {
				t.Fatalf("a method the API lacks: %v", err)
			}
		})
	}

	t.Run("nodes", func(t *testing.T) {
		_, err := c.MachineClient.Reboot(client.WithNodes(testCtx(t), nodes[0].IP, nodes[1].IP), &machine.RebootRequest{})
		if err != nil {
			t.Fatalf("a fan-out whose nodes all fail still answers: %v", err)
		}

		_, err = c.RebootWithResponse(client.WithNodes(testCtx(t), nodes[0].IP, nodes[1].IP))
		for node, code := range nodeErrors(t, err) {
			if code != codes.Unimplemented {
				t.Errorf("%s: %v", node, code)
			}
		}
	})
}

func TestNodesRefusedForServicesThatCannotMerge(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	err := c.Conn().Invoke(client.WithNodes(testCtx(t), nodes[0].IP), "/cosi.resource.State/Get", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("COSI with nodes: %v", err)
	}
}

func TestBadRoutingIsInvalidArgument(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))

	if _, err := c.Version(client.WithNode(testCtx(t), "unix:///run/machined.sock")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad node: %v", err)
	}
}

func TestMachinedDownIsUnavailableWithoutDetails(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})
	node.Backend.Stop()

	_, err := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, p.Client(t, role.Admin))).Version(testCtx(t))
	if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), node.Backend.Socket()) {
		t.Fatalf("machined down: %v", err)
	}

	if len(sink.Find(t, "machined unavailable")) == 0 {
		t.Fatal("the cause was not logged")
	}
}
