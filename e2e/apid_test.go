package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
)

// talos returns a Talos client of node 1 (or of endpoint) with a fresh
// client certificate holding roles.
func (c *cluster) talos(t *testing.T, endpoint string, roles ...role.Role) *client.Client {
	t.Helper()

	return apidtest.TalosClient(t, endpoint, c.pki.ClientTLS(t, c.pki.Client(t, roles...)))
}

func TestVersionLocalNodeAndNodes(t *testing.T) {
	c := startCluster(t)
	cl := c.talos(t, nodeIPs[0], role.Reader)

	local, err := cl.Version(ctx(t))
	if err != nil || len(local.Messages) != 1 || local.Messages[0].GetMetadata().GetHostname() != "node-1" {
		t.Fatalf("local Version: %v %v", local, err)
	}

	one, err := cl.MachineClient.Hostname(client.WithNode(ctx(t), nodeIPs[1]), &emptypb.Empty{})
	if err != nil || len(one.Messages) != 1 || one.Messages[0].GetHostname() != "node-2" {
		t.Fatalf("Hostname with node: %v %v", one, err)
	}

	all, err := cl.Version(client.WithNodes(ctx(t), nodeIPs...))
	if err != nil || len(all.Messages) != 3 {
		t.Fatalf("Version with nodes: %v %v", all, err)
	}

	for i, m := range all.Messages {
		if m.GetMetadata().GetHostname() != nodeIPs[i] || m.GetVersion().GetTag() != apidtest.VersionTag {
			t.Errorf("reply %d: %v", i, m)
		}
	}

	// Every node's machined got the call once per route that reached it,
	// with the caller's roles and without routing metadata.
	for i, n := range c.nodes {
		for _, call := range n.backend.Calls() {
			if !slices.Equal(call.Roles, []string{"os:reader"}) || len(call.Metadata.Get("nodes")) != 0 || len(call.Metadata.Get("node")) != 0 {
				t.Errorf("node %d saw %+v", i+1, call)
			}
		}
	}

	if got := len(c.nodes[2].backend.CallsTo(machine.MachineService_Version_FullMethodName)); got != 1 {
		t.Errorf("the worker node answered Version %d times, want 1", got)
	}
}

func TestNodesWithAStoppedAndAHangingNode(t *testing.T) {
	c := startCluster(t)
	cl := c.talos(t, nodeIPs[0], role.Reader)
	hang := hanging(t)

	if err := c.nodes[2].stop(t); err != nil {
		t.Fatalf("SIGTERM: apid did not exit cleanly: %v", err)
	}

	const deadline = 10 * time.Second

	callCtx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	start := time.Now()
	resp, err := cl.Version(client.WithNodes(callCtx, nodeIPs[0], nodeIPs[1], nodeIPs[2], hang))

	if elapsed := time.Since(start); elapsed >= deadline {
		t.Fatalf("answer took %v, past the deadline", elapsed)
	}

	if resp == nil || len(resp.Messages) != 2 {
		t.Fatalf("replies %v, want nodes 1 and 2", resp)
	}

	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 2 {
		t.Fatalf("node errors %v, want the stopped and the hanging node", err)
	}

	// The stopped node refuses connections. The hanging one fails when
	// apid's connect timeout or the node's share of the deadline runs out,
	// whichever comes first.
	want := map[string][]codes.Code{
		nodeIPs[2]: {codes.Unavailable},
		hang:       {codes.Unavailable, codes.DeadlineExceeded},
	}

	for _, e := range merr.Errors {
		var ne *client.NodeError
		if !errors.As(e, &ne) || !slices.Contains(want[ne.Node], status.Code(ne.Err)) {
			t.Errorf("unexpected node error %v", e)
		}
	}
}

func TestStreamingThroughNodes(t *testing.T) {
	c := startCluster(t)
	reader := c.talos(t, nodeIPs[0], role.Reader)

	// Tail: two lines from each node, each tagged with its node.
	logs, err := reader.Logs(client.WithNodes(ctx(t), nodeIPs...), "system", common.ContainerDriver_CONTAINERD, "apid", false, 2)
	if err != nil {
		t.Fatal(err)
	}

	perNode := map[string]int{}

	for {
		msg, err := logs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			t.Fatal(err)
		}

		perNode[msg.GetMetadata().GetHostname()]++
	}

	for _, ip := range nodeIPs {
		if perNode[ip] != 2 {
			t.Fatalf("tail lines per node %v", perNode)
		}
	}

	followCtx, cancel := context.WithCancel(ctx(t))
	defer cancel()

	follow, err := reader.Logs(client.WithNodes(followCtx, nodeIPs...), "system", common.ContainerDriver_CONTAINERD, "timed", true, 0)
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range c.nodes {
		if err := n.backend.WaitLogFollowers(followCtx, 1); err != nil {
			t.Fatal(err)
		}
	}

	for i, n := range c.nodes {
		line := fmt.Sprintf("e2e line %d", i)
		n.backend.AppendLog("timed", line)

		msg, err := follow.Recv()
		if err != nil || msg.GetMetadata().GetHostname() != nodeIPs[i] || string(msg.GetBytes()) != line+"\n" {
			t.Fatalf("follow: %v %v, want %q from %s", msg, err, line, nodeIPs[i])
		}
	}

	eventsThroughNodes(t, c)
}

func eventsThroughNodes(t *testing.T, c *cluster) {
	t.Helper()

	reader := c.talos(t, nodeIPs[1], role.Reader)
	operator := c.talos(t, nodeIPs[1], role.Operator)

	evCtx, cancel := context.WithCancel(ctx(t))
	defer cancel()

	events, err := reader.Events(client.WithNodes(evCtx, nodeIPs...), client.WithTailEvents(0))
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range c.nodes {
		if err := n.backend.WaitEventFollowers(evCtx, 1); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := operator.ServiceRestart(client.WithNodes(ctx(t), nodeIPs...), "trustd"); err != nil {
		t.Fatal(err)
	}

	perNode := map[string]int{}

	for range 2 * len(nodeIPs) {
		ev, err := events.Recv()
		if err != nil {
			t.Fatal(err)
		}

		if e := ev.GetMetadata().GetError(); e != "" { //nolint:staticcheck
			t.Fatalf("node %s failed: %s", ev.GetMetadata().GetHostname(), e)
		}

		perNode[ev.GetMetadata().GetHostname()]++
	}

	for _, ip := range nodeIPs {
		if perNode[ip] != 2 {
			t.Fatalf("restart events per node %v", perNode)
		}
	}
}

func TestRefusals(t *testing.T) {
	c := startCluster(t)
	other := apidtest.NewPKI(t)
	p := c.pki

	refused := map[string]*tls.Config{
		"certificate from another CA":    p.ClientTLS(t, other.Client(t, role.Admin)),
		"expired certificate":            p.ClientTLS(t, p.ExpiredClient(t, role.Admin)),
		"certificate without ClientAuth": p.ClientTLS(t, p.Server(t, "127.0.2.99")),
		"certificate without any usage":  p.ClientTLS(t, p.NoUsageClient(t, role.Admin)),
	}

	for name, cfg := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := apidtest.TalosClient(t, nodeIPs[0], cfg).Version(ctx(t))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want the handshake refused", err)
			}
		})
	}

	// Without a certificate the handshake completes (for health probes);
	// the call is refused.
	_, err := apidtest.TalosClient(t, nodeIPs[0], p.ClientTLS(t, apidtest.Pair{})).Version(ctx(t))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no client certificate: %v, want Unauthenticated", err)
	}

	reader := c.talos(t, nodeIPs[0], role.Reader)

	_, err = reader.ServiceRestart(ctx(t), "apid")
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), machine.MachineService_ServiceRestart_FullMethodName) {
		t.Fatalf("reader ServiceRestart: %v", err)
	}

	forged := metadata.AppendToOutgoingContext(ctx(t), wire.MetadataRole, string(role.Admin))
	if _, err := reader.ServiceRestart(client.WithNode(forged, nodeIPs[1]), "apid"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader with a forged talos-role: %v", err)
	}

	for i, n := range c.nodes {
		if calls := n.backend.CallsTo(machine.MachineService_ServiceRestart_FullMethodName); len(calls) != 0 {
			t.Fatalf("node %d restarted a service for a refused caller: %+v", i+1, calls)
		}
	}

	if !strings.Contains(c.nodes[0].stderr.String(), `"msg":"permission denied"`) {
		t.Fatal("apid wrote no audit record of the denial")
	}
}

func TestWorkerRefusesForwarding(t *testing.T) {
	c := startCluster(t)
	worker := c.talos(t, nodeIPs[2], role.Admin)

	if _, err := worker.Version(ctx(t)); err != nil {
		t.Fatalf("the worker's own Version: %v", err)
	}

	if _, err := worker.Version(client.WithNode(ctx(t), nodeIPs[2])); err != nil {
		t.Fatalf("the worker named as node: %v", err)
	}

	_, err := worker.Version(client.WithNode(ctx(t), nodeIPs[0]))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no request forwarding") {
		t.Fatalf("forwarding through the worker: %v", err)
	}
}

func TestCertificateFilesReloaded(t *testing.T) {
	c := startCluster(t)
	n := c.nodes[0]
	renewed := c.pki.Server(t, n.ip)

	replaceFile(t, n.keyPath, renewed.KeyPEM)
	replaceFile(t, n.certPath, renewed.CertPEM)

	var seen atomic.Pointer[x509.Certificate]

	cfg := c.pki.ClientTLS(t, c.pki.Client(t, role.Reader))
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		seen.Store(cs.PeerCertificates[0])

		return nil
	}

	// The watcher polls: new connections see the renewed certificate soon.
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if _, err := apidtest.TalosClient(t, n.ip, cfg).Version(ctx(t)); err != nil {
			t.Fatal(err)
		}

		if seen.Load().Equal(renewed.Cert) {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("apid still serves the old certificate:\n%s", n.stderr.String())
		}
	}
}

// The client config Aegis generates (Talos's talosconfig layout) drives
// the Talos client against apid as it is.
func TestClientConfigContext(t *testing.T) {
	c := startCluster(t)

	cc, err := certs.NewClientCertificate(c.pki.Issuer(), certs.ClientCertOptions{Roles: role.NewSet(role.Reader), CommonName: "e2e"})
	if err != nil {
		t.Fatal(err)
	}

	data, err := certs.NewClientConfig("e2e", []string{nodeIPs[0]}, c.pki.CA.CertPEM, cc).Marshal()
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := clientconfig.FromBytes(data)
	if err != nil {
		t.Fatal(err)
	}

	cl, err := client.New(ctx(t), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() //nolint:errcheck

	resp, err := cl.Version(client.WithNodes(ctx(t), nodeIPs...))
	if err != nil || len(resp.Messages) != len(nodeIPs) {
		t.Fatalf("Version with nodes from a client config: %v %v", resp, err)
	}
}
