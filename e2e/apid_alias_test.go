package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/wire"
)

// deadIP is a loopback address where no node runs.
const deadIP = "127.0.2.9"

// aliases are spellings of the IPv4 address ip that name the same node.
func aliases(ip string) []string {
	return []string{ip, "::ffff:" + ip, "0::ffff:" + ip, "[::ffff:" + ip + "]", "0:0:0:0:0:ffff:" + ip}
}

func TestNodesAliasesRunOnce(t *testing.T) {
	c := startCluster(t)
	admin := c.talos(t, nodeIPs[0], role.Admin)

	// Another node and apid's own node, each under every spelling: one
	// reply and one restart per node.
	targets := append(aliases(nodeIPs[1]), aliases(nodeIPs[0])...)

	resp, err := admin.ServiceRestart(client.WithNodes(ctx(t), targets...), "trustd")
	if err != nil {
		t.Fatalf("ServiceRestart: %v", err)
	}

	if len(resp.Messages) != 2 || resp.Messages[0].GetMetadata().GetHostname() != nodeIPs[1] ||
		resp.Messages[1].GetMetadata().GetHostname() != nodeIPs[0] {
		t.Fatalf("replies %v, want one from each of %s and %s", resp.Messages, nodeIPs[1], nodeIPs[0])
	}

	for i, n := range c.nodes[:2] {
		if got := len(n.backend.CallsTo(machine.MachineService_ServiceRestart_FullMethodName)); got != 1 {
			t.Errorf("node %d restarted trustd %d times, want once", i+1, got)
		}
	}

	// A stream too: the tail of one node's log, once.
	logs, err := admin.Logs(client.WithNodes(ctx(t), aliases(nodeIPs[1])...), "system", common.ContainerDriver_CONTAINERD, "apid", false, 2)
	if err != nil {
		t.Fatal(err)
	}

	lines := 0

	for {
		msg, err := logs.Recv()
		if err != nil {
			break
		}

		if msg.GetMetadata().GetHostname() != nodeIPs[1] || msg.GetMetadata().GetError() != "" { //nolint:staticcheck
			t.Fatalf("log message %v", msg)
		}

		lines += strings.Count(string(msg.GetBytes()), "\n")
	}

	if lines != 2 {
		t.Fatalf("%d log lines, want the 2 of one node", lines)
	}
}

func TestRoutingRefusesPortsAndUnknownNames(t *testing.T) {
	c := startCluster(t)
	admin := c.talos(t, nodeIPs[0], role.Admin)

	refused := []struct {
		name, want string
		route      func(context.Context) context.Context
	}{
		{"node with port 22", "ports are not allowed", func(ctx context.Context) context.Context { return client.WithNode(ctx, nodeIPs[1]+":22") }},
		{"node on the API port", "ports are not allowed", func(ctx context.Context) context.Context {
			return client.WithNode(ctx, net.JoinHostPort(nodeIPs[1], strconv.Itoa(wire.APIDPort)))
		}},
		{"nodes with a port", "ports are not allowed", func(ctx context.Context) context.Context {
			return client.WithNodes(ctx, nodeIPs[1], "[::ffff:"+nodeIPs[1]+"]:50000")
		}},
	}

	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := admin.MachineClient.ServiceRestart(tt.route(ctx(t)), &machine.ServiceRestartRequest{Id: "trustd"})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("unary: %v, want InvalidArgument saying %q", err, tt.want)
			}

			stream, err := admin.MachineClient.Events(tt.route(ctx(t)), &machine.EventsRequest{TailEvents: 1})
			if err == nil {
				_, err = stream.Recv()
			}

			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("stream: %v, want InvalidArgument saying %q", err, tt.want)
			}
		})
	}

	// A node apid does not know is Unavailable (it may be one rejoining),
	// alone in a fan-out: the known node still answers, and nothing is
	// dialed or looked up for the other.
	unknown := []struct{ name, node string }{
		{"an unknown name", "nothing.invalid"},
		{"localhost", "localhost"},
		{"an address of no cluster node", "169.254.169.254"},
		{"loopback", "127.0.0.1"},
	}

	for _, tt := range unknown {
		t.Run("node "+tt.name, func(t *testing.T) {
			want := strconv.Quote(tt.node) + " is neither this node"

			_, err := admin.MachineClient.ServiceRestart(client.WithNode(ctx(t), tt.node), &machine.ServiceRestartRequest{Id: "trustd"})
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
				t.Fatalf("unary: %v, want Unavailable saying %q", err, want)
			}

			stream, err := admin.MachineClient.Events(client.WithNode(ctx(t), tt.node), &machine.EventsRequest{TailEvents: 1})
			if err == nil {
				_, err = stream.Recv()
			}

			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
				t.Fatalf("stream: %v, want Unavailable saying %q", err, want)
			}

			resp, err := admin.MachineClient.Version(client.WithNodes(ctx(t), nodeIPs[1], tt.node), &emptypb.Empty{})
			if err != nil {
				t.Fatal(err)
			}

			entries := map[string]string{}
			for _, m := range resp.GetMessages() {
				entries[m.GetMetadata().GetHostname()] = codes.Code(m.GetMetadata().GetStatus().GetCode()).String() + " " + m.GetMetadata().GetError()
			}

			if len(entries) != 2 || entries[nodeIPs[1]] != "OK " || !strings.HasPrefix(entries[tt.node], "Unavailable ") ||
				!strings.Contains(entries[tt.node], want) {
				t.Fatalf("fan-out entries %v, want %s answered and %s refused Unavailable", entries, nodeIPs[1], tt.node)
			}
		})
	}

	for i, n := range c.nodes {
		if calls := n.backend.CallsTo(machine.MachineService_ServiceRestart_FullMethodName); len(calls) != 0 {
			t.Fatalf("node %d ran a refused call: %+v", i+1, calls)
		}
	}

	if log := c.nodes[0].stderr.String(); strings.Contains(log, "lookup") || strings.Contains(log, "nothing.invalid:") {
		t.Fatalf("apid looked up or dialed a name it does not know:\n%s", log)
	}
}

func TestUnreachableNodeHidesDialDetail(t *testing.T) {
	c := startCluster(t)
	admin := c.talos(t, nodeIPs[0], role.Admin)
	want := "apid: node " + deadIP + " unreachable"

	// One node, unary and stream, named as mapped IPv6: the error names
	// the canonical address.
	_, err := admin.Version(client.WithNode(ctx(t), "::ffff:"+deadIP))
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != want {
		t.Fatalf("node: %v, want Unavailable %q", err, want)
	}

	stream, err := admin.MachineClient.Events(client.WithNode(ctx(t), deadIP), &machine.EventsRequest{TailEvents: 1})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != want {
		t.Fatalf("node stream: %v, want Unavailable %q", err, want)
	}

	// In a fan-out, the node's error entry.
	resp, _ := admin.MachineClient.Version(client.WithNodes(ctx(t), nodeIPs[1], deadIP), &emptypb.Empty{})
	if len(resp.GetMessages()) != 2 {
		t.Fatalf("replies %v", resp)
	}

	entry := resp.GetMessages()[1].GetMetadata()
	if entry.GetHostname() != deadIP || entry.GetStatus().GetMessage() != want || codes.Code(entry.GetStatus().GetCode()) != codes.Unavailable ||
		!strings.HasSuffix(entry.GetError(), "desc = "+want) { //nolint:staticcheck
		t.Fatalf("error entry %v, want %q", entry, want)
	}

	// The cause is in apid's log, once per failure, and nowhere else.
	log := c.nodes[0].stderr.String()
	if got := strings.Count(log, "connection refused"); got != 3 || strings.Count(log, `"msg":"node unreachable"`) != 3 {
		t.Fatalf("%d log lines with the cause, want 3 (one per failed call):\n%s", got, log)
	}
}

// hangingIPs are the addresses of hangingNodes(n).
func hangingIPs(n int) []string {
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.%d.%d", 3+i/250, 1+i%250)
	}

	return ips
}

// hangingNodes listens on n addresses from 127.0.3.1 on, on the API port,
// accepts connections and never answers: nodes that hang. It returns the
// addresses and a count of the connections accepted.
func hangingNodes(t *testing.T, n int) ([]string, *atomic.Int64) {
	t.Helper()

	var (
		accepted atomic.Int64
		mu       sync.Mutex
		held     []net.Conn
		ips      []string
	)

	for _, ip := range hangingIPs(n) {
		lis, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(wire.APIDPort)))
		if err != nil {
			t.Fatal(err)
		}

		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}

				accepted.Add(1)
				mu.Lock()
				held = append(held, conn)
				mu.Unlock()
			}
		}()

		t.Cleanup(func() { lis.Close() })

		ips = append(ips, ip)
	}

	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()

		for _, conn := range held {
			conn.Close()
		}
	})

	return ips, &accepted
}

// TestReaderCannotStarveAdmin: a reader fans out to as many nodes as it
// may, twice at once, all of them nodes that hang, so that apid holds a
// connection for each until its connect timeout. An admin's forwarded
// call meanwhile still gets a connection.
func TestReaderCannotStarveAdmin(t *testing.T) {
	c := startCluster(t, hangingIPs(256)...)
	reader := c.talos(t, nodeIPs[0], role.Reader)
	admin := c.talos(t, nodeIPs[0], role.Admin)
	hang, accepted := hangingNodes(t, 256)

	readerCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	type result struct {
		resp *machine.VersionResponse
		err  error
	}

	fanOut := func(nodes []string, into chan<- result) {
		resp, err := reader.MachineClient.Version(client.WithNodes(readerCtx, nodes...), &emptypb.Empty{})
		into <- result{resp, err}
	}

	// The first fan-out holds its 128 connections; the second is then
	// refused at once, or holds 128 more.
	first, second := make(chan result, 1), make(chan result, 1)

	go fanOut(hang[:128], first)

	for accepted.Load() < 128 {
		time.Sleep(10 * time.Millisecond)
	}

	go fanOut(hang[128:], second)

	var refused *result

	for refused == nil && accepted.Load() < 256 {
		select {
		case r := <-second:
			refused = &r
		case <-time.After(10 * time.Millisecond):
		}
	}

	resp, err := admin.MachineClient.Hostname(client.WithNode(ctx(t), nodeIPs[1]), &emptypb.Empty{})
	if err != nil || len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetHostname() != "node-2" {
		t.Fatalf("admin's call while a reader holds connections: %v %v", resp, err)
	}

	if len(first) != 0 || refused == nil {
		t.Fatalf("the reader's first fan-out ended before the admin's call, or the second was not refused (%d connections)", accepted.Load())
	}

	// The reader's second fan-out was refused naming a limit: as a whole
	// by the stream cap of its key (it already has 128 nodes' calls open),
	// or node by node by the pool's share of a caller.
	if refused.err != nil {
		if status.Code(refused.err) != codes.ResourceExhausted || !strings.Contains(refused.err.Error(), "limit 128") {
			t.Fatalf("second fan-out: %v, want ResourceExhausted naming the limit", refused.err)
		}

		return
	}

	if len(refused.resp.GetMessages()) != 128 {
		t.Fatalf("second fan-out: %d entries", len(refused.resp.GetMessages()))
	}

	for _, m := range refused.resp.GetMessages() {
		md := m.GetMetadata()
		if codes.Code(md.GetStatus().GetCode()) != codes.ResourceExhausted || !strings.Contains(md.GetError(), "at most 128 other nodes") { //nolint:staticcheck
			t.Fatalf("entry %v, want ResourceExhausted naming the limit", md)
		}
	}
}
