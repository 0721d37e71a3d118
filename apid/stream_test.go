package apid_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
)

// logLines reads a Logs stream to its end and returns the lines by the
// hostname each message carries.
func logLines(t *testing.T, stream machine.MachineService_LogsClient) map[string][]string {
	t.Helper()

	out := map[string][]string{}

	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return out
		}

		if err != nil {
			t.Fatalf("Logs: %v", err)
		}

		host := msg.GetMetadata().GetHostname()
		if e := msg.GetMetadata().GetError(); e != "" { //nolint:staticcheck
			out[host] = append(out[host], "error: "+e)

			continue
		}

		out[host] = append(out[host], strings.TrimSuffix(string(msg.GetBytes()), "\n"))
	}
}

func TestLogsThroughEveryRoute(t *testing.T) {
	p, nodes := cluster(t, 3)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	all := []string{nodes[0].IP, nodes[1].IP, nodes[2].IP}

	tests := []struct {
		name string
		ctx  func(context.Context) context.Context
		want map[string]string // tagged hostname -> the node whose lines it carries
	}{
		{"local", func(ctx context.Context) context.Context { return ctx }, map[string]string{"node-a": "node-a"}},
		{"node", func(ctx context.Context) context.Context { return client.WithNode(ctx, all[1]) }, map[string]string{"node-b": "node-b"}},
		{
			"nodes", func(ctx context.Context) context.Context { return client.WithNodes(ctx, all...) },
			map[string]string{all[0]: "node-a", all[1]: "node-b", all[2]: "node-c"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := c.Logs(tt.ctx(testCtx(t)), "system", common.ContainerDriver_CONTAINERD, "apid", false, 2)
			if err != nil {
				t.Fatal(err)
			}

			got := logLines(t, stream)
			if len(got) != len(tt.want) {
				t.Fatalf("lines from %d nodes, want %d: %v", len(got), len(tt.want), got)
			}

			for host, node := range tt.want {
				want := []string{node + " apid line 4", node + " apid line 5"}
				if strings.Join(got[host], "|") != strings.Join(want, "|") {
					t.Errorf("%s: %q, want %q", host, got[host], want)
				}
			}
		})
	}
}

func TestLogsFollowThroughNodes(t *testing.T) {
	p, nodes := cluster(t, 3)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	all := []string{nodes[0].IP, nodes[1].IP, nodes[2].IP}

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	stream, err := c.Logs(client.WithNodes(ctx, all...), "system", common.ContainerDriver_CONTAINERD, "trustd", true, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Lines are appended once every node follows, one node at a time,
	// each only once the line before it has come through: nothing depends
	// on timing.
	for _, n := range nodes {
		if err := n.Backend.WaitLogFollowers(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}

	for round := range 2 {
		for i, n := range nodes {
			line := fmt.Sprintf("follow %d from %d", round, i)
			n.Backend.AppendLog("trustd", line)

			msg, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}

			if msg.GetMetadata().GetHostname() != all[i] || string(msg.GetBytes()) != line+"\n" {
				t.Fatalf("got %q from %q, want %q from %q", msg.GetBytes(), msg.GetMetadata().GetHostname(), line, all[i])
			}
		}
	}

	cancel()

	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}

	// The cancellation reaches every node's machined.
	for i, n := range nodes {
		if err := n.Backend.WaitLogFollowers(testCtx(t), 0); err != nil {
			t.Fatalf("node %d still follows after the caller left: %v", i, err)
		}
	}
}

func TestEventsFollowThroughNodes(t *testing.T) {
	p, nodes := cluster(t, 3)
	reader := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	operator := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Operator)))
	all := []string{nodes[0].IP, nodes[1].IP, nodes[2].IP}

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	stream, err := reader.Events(client.WithNodes(ctx, all...), client.WithTailEvents(-1))
	if err != nil {
		t.Fatal(err)
	}

	// Each backend starts with one event per service.
	initial := len(apidtest.Services()) * len(nodes)
	seen := map[string]int{}

	for range initial {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}

		seen[ev.GetMetadata().GetHostname()]++
	}

	for _, a := range all {
		if seen[a] != len(apidtest.Services()) {
			t.Fatalf("initial events per node %v", seen)
		}
	}

	// A restart on all nodes makes two events on each.
	if _, err := operator.ServiceRestart(client.WithNodes(testCtx(t), all...), "timed"); err != nil {
		t.Fatal(err)
	}

	restarts := map[string]int{}

	for range 2 * len(nodes) {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}

		var sse machine.ServiceStateEvent
		if err := ev.GetData().UnmarshalTo(&sse); err != nil || sse.GetService() != "timed" {
			t.Fatalf("event %v (%v)", ev, err)
		}

		restarts[ev.GetMetadata().GetHostname()]++
	}

	for _, a := range all {
		if restarts[a] != 2 {
			t.Fatalf("restart events per node %v", restarts)
		}
	}
}

func TestStreamWithDeadNodeCarriesItsError(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	dead := deadAddr(t, p)

	stream, err := c.Logs(client.WithNodes(testCtx(t), nodes[0].IP, dead), "system", common.ContainerDriver_CONTAINERD, "apid", false, 1)
	if err != nil {
		t.Fatal(err)
	}

	got := logLines(t, stream)
	if len(got[nodes[0].IP]) != 1 || len(got[dead]) != 1 || !strings.HasPrefix(got[dead][0], "error: ") {
		t.Fatalf("lines %v", got)
	}
}

func TestStreamsAreAuthorized(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	// Read streams a file: admin only.
	stream, err := c.MachineClient.Read(testCtx(t), &machine.ReadRequest{Path: "/etc/shadow"})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), machine.MachineService_Read_FullMethodName) {
		t.Fatalf("Read as reader: %v", err)
	}

	imp := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Impersonator(t)))

	logs, err := imp.Logs(testCtx(t), "system", common.ContainerDriver_CONTAINERD, "apid", false, 1)
	if err == nil {
		_, err = logs.Recv()
	}

	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Logs as a bare impersonator: %v", err)
	}

	if len(nodes[0].Backend.Calls()) != 0 {
		t.Fatal("a refused stream reached machined")
	}
}

// TestClientStreamThroughApid sends a client stream (EtcdRecover, the
// backend's only one) to the local node and to another: every chunk must
// arrive, in order, and the reply must come from the node addressed.
func TestClientStreamThroughApid(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Admin)))
	chunks := []string{"first", "second", "", "fourth"}

	for _, tt := range []struct {
		name string
		ctx  func(context.Context) context.Context
		node int
	}{
		{"local", func(ctx context.Context) context.Context { return ctx }, 0},
		{"node", func(ctx context.Context) context.Context { return client.WithNode(ctx, nodes[1].IP) }, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := c.MachineClient.EtcdRecover(tt.ctx(testCtx(t)))
			if err != nil {
				t.Fatal(err)
			}

			for _, chunk := range chunks {
				if err := stream.Send(&common.Data{Bytes: []byte(chunk)}); err != nil {
					t.Fatalf("send %q: %v", chunk, err)
				}
			}

			resp, err := stream.CloseAndRecv()
			if err != nil {
				t.Fatal(err)
			}

			if got, want := resp.GetMessages()[0].GetMetadata().GetHostname(), nodes[tt.node].Backend.Name(); got != want {
				t.Errorf("reply from %q, want %q", got, want)
			}

			calls := nodes[tt.node].Backend.Recovered()
			if len(calls) != 1 {
				t.Fatalf("%d EtcdRecover calls reached the node, want 1", len(calls))
			}

			var got []string
			for _, c := range calls[0] {
				got = append(got, string(c))
			}

			if strings.Join(got, "|") != strings.Join(chunks, "|") {
				t.Errorf("chunks %q, want %q", got, chunks)
			}
		})
	}
}
