package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	clusterapi "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clusterres "github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// membersHeartbeat is the nodes' heartbeat interval in the membership
// tests: a killed node ages out after three of them.
const membersHeartbeat = time.Second

// TestMembershipAndClusterHealth runs one cluster of three control planes
// and two workers: every node in the member list with its role, a member's
// hostname as routing target, the cluster health check passing, then
// failing with a worker's apid frozen (naming the node and apid) and with
// a control plane's etcd stopped (naming the member), a frozen and a killed
// worker leaving the list, and no worker taking a name it does not hold.
func TestMembershipAndClusterHealth(t *testing.T) {
	needBinaries(t)
	t.Parallel()

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "mem", ControlPlanes: 3, Workers: 2, CIDR: netip.MustParsePrefix("127.9.12.0/24"),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: etcdTimeout, HeartbeatInterval: membersHeartbeat,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 30))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	admin := talosClient(t, c.ClientConfigPath())
	cps := c.ControlPlanes()
	workers := slices.DeleteFunc(slices.Clone(c.Nodes), func(n localcluster.Node) bool { return n.Type.IsControlPlane() })

	t.Run("members listed with their roles", func(t *testing.T) {
		eventually(t, "5 members", func() error { return membersAre(etcdCtx(t), admin, c.Nodes) })

		reader := filepath.Join(c.Dir, "reader")
		if out, err := aegisctl(t, c.Dir, "config", "new", reader, "--roles", "os:reader", "--crt-ttl", "1h"); err != nil {
			t.Fatalf("config new: %v\n%s", err, out)
		}

		out, err := aegisctl(t, c.Dir, "--aegisconfig", reader, "get", "members")
		if err != nil || !strings.Contains(out, "HOSTNAME") || strings.Count(out, " worker ")+strings.Count(out, " controlplane ") != 5 {
			t.Fatalf("get members as os:reader: %v\n%s", err, out)
		}

		t.Logf("aegisctl get members:\n%s", out)

		// A worker's entry is held by its connection to a control plane's
		// trustd: connected, rather than last seen a moment ago.
		if strings.Count(out, " connected\n") != len(workers) {
			t.Errorf("get members: want the %d workers connected\n%s", len(workers), out)
		}

		resp, err := membership.NewMembershipServiceClient(admin.Conn()).List(etcdCtx(t), &membership.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}

		for _, m := range resp.GetMessages()[0].GetMembers() {
			if held := m.GetRole() == "worker"; m.GetHeld() != held {
				t.Errorf("%s (%s): held %v, want %v", m.GetHostname(), m.GetRole(), m.GetHeld(), held)
			}
		}

		// The resource API's members (talosctl get members) follow the
		// same list, on every control plane.
		for _, cp := range cps {
			eventually(t, "5 members in "+cp.Name+"'s resources", func() error {
				list, err := safe.StateListAll[*clusterres.Member](client.WithNode(etcdCtx(t), cp.Address), admin.COSI)
				if err != nil {
					return err
				}

				if list.Len() != len(c.Nodes) {
					return fmt.Errorf("%d members", list.Len())
				}

				return nil
			})
		}

		// A worker runs no etcd: it says to ask a control plane.
		_, err = membership.NewMembershipServiceClient(admin.Conn()).List(client.WithNode(etcdCtx(t), workers[0].Address), &membership.ListRequest{})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("List on a worker: %v, want FailedPrecondition", err)
		}
	})

	t.Run("routing by member name", func(t *testing.T) { checkRoutingByName(t, admin, workers[0], cps[1]) })

	t.Run("healthy cluster", func(t *testing.T) {
		out, err := aegisctl(t, c.Dir, "health", "--wait-timeout", "2m")
		if err != nil || !strings.Contains(out, "cluster healthy in") {
			t.Fatalf("health: %v\n%s", err, out)
		}

		// The Talos client's own ClusterService client, as talosctl health --server.
		start := time.Now()
		msgs, err := talosHealth(etcdCtx(t), admin, 0)
		took := time.Since(start)

		if err != nil || !strings.HasPrefix(msgs[len(msgs)-1], "cluster healthy") {
			t.Fatalf("HealthCheck: %v\n%s", err, strings.Join(msgs, "\n"))
		}

		t.Logf("one HealthCheck round of 3+2 nodes took %s:\n%s", took.Round(time.Millisecond), strings.Join(msgs, "\n"))
	})

	t.Run("worker apid frozen", func(t *testing.T) {
		pid := nodeServicePID(workers[0], "apid")
		if pid == 0 {
			t.Fatal("no apid process on " + workers[0].Name)
		}

		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}

		defer syscall.Kill(pid, syscall.SIGCONT) //nolint:errcheck // best effort

		out, err := aegisctl(t, c.Dir, "health", "--wait-timeout", "3s")
		if err == nil || !strings.Contains(out, "node "+workers[0].Name+" ("+workers[0].Address+"): apid not answering") {
			t.Fatalf("health with %s's apid frozen: %v\n%s", workers[0].Name, err, out)
		}

		t.Logf("health with a frozen apid:\n%s", out)
	})

	t.Run("etcd stopped on a control plane", func(t *testing.T) {
		eventually(t, "healthy again", func() error { _, err := talosHealth(etcdCtx(t), admin, 0); return err })

		if _, err := admin.ServiceStop(client.WithNode(etcdCtx(t), cps[2].Address), "etcd"); err != nil {
			t.Fatal(err)
		}

		// Asked of the very control plane whose etcd is stopped: it reads
		// the member list through the others.
		out, err := aegisctl(t, c.Dir, "-e", cps[2].Address, "health", "--wait-timeout", "3s")
		if err == nil || !strings.Contains(out, "etcd: member "+cps[2].Name+": not answering") ||
			!strings.Contains(out, "node "+cps[2].Name+" ("+cps[2].Address+"): service etcd is") {
			t.Fatalf("health with etcd stopped on %s: %v\n%s", cps[2].Name, err, out)
		}

		t.Logf("health with etcd stopped:\n%s", out)

		if _, err := admin.ServiceStart(client.WithNode(etcdCtx(t), cps[2].Address), "etcd"); err != nil {
			t.Fatal(err)
		}
	})

	// A worker's entry is held by its connection to a control plane's
	// trustd. A worker that vanishes without closing it (here its machined
	// stopped whole, as a node whose power is cut) leaves once trustd's
	// keepalive finds the connection silent (a ping after 20 s, 10 s to
	// answer) and the grace of three intervals has passed; going on, it is
	// back within its next look.
	t.Run("frozen worker leaves and comes back", func(t *testing.T) {
		frozen := workers[0]
		if err := syscall.Kill(frozen.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}

		resumed := false
		defer func() {
			if !resumed {
				_ = syscall.Kill(frozen.PID, syscall.SIGCONT)
			}
		}()

		start := time.Now()
		left := slices.Max(converged(t, admin, cps, frozen.Name, false, start))

		t.Logf("%s, its machined stopped, left every control plane's list %s after", frozen.Name, left.Round(100*time.Millisecond))

		// trustd's ping after 20 s of silence, 10 s for its answer, the
		// grace of three intervals and the sweep's second, with room.
		if limit := 20*time.Second + 10*time.Second + 3*membersHeartbeat + 10*time.Second; left > limit {
			t.Errorf("%s left after %s, more than %s", frozen.Name, left, limit)
		}

		if err := syscall.Kill(frozen.PID, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}

		resumed = true
		back := slices.Max(converged(t, admin, cps, frozen.Name, true, time.Now()))

		t.Logf("%s back %s after it went on", frozen.Name, back.Round(100*time.Millisecond))
	})

	// An entry reaches every control plane's list and members resource as
	// soon as etcd commits it (each follows the list with a watch), so
	// they agree within a heartbeat interval; an entry of a node that
	// stops leaves when its lease ends, at most three intervals after its
	// last heartbeat.
	t.Run("killed worker ages out and comes back", func(t *testing.T) {
		gone := workers[1]
		if err := c.Kill(gone.Name); err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		left := converged(t, admin, cps, gone.Name, false, start)
		gap, each := spread(left)

		t.Logf("%s left every control plane's list and members resource %s after it was killed (%s; heartbeat %s): %s apart",
			gone.Name, slices.Max(left).Round(100*time.Millisecond), each, membersHeartbeat, gap.Round(time.Millisecond))

		if gap > membersHeartbeat {
			t.Errorf("the control planes disagreed for %s, more than a heartbeat interval (%s)", gap, membersHeartbeat)
		}

		start = time.Now()

		if _, err := c.StartNode(etcdCtx(t), gone.Name, waitTimeout); err != nil {
			t.Fatal(err)
		}

		back := converged(t, admin, cps, gone.Name, true, start)
		gap, each = spread(back)

		t.Logf("%s back in every control plane's list and members resource %s after its start (%s): %s apart",
			gone.Name, slices.Max(back).Round(100*time.Millisecond), each, gap.Round(time.Millisecond))

		if gap > membersHeartbeat {
			t.Errorf("the control planes disagreed for %s, more than a heartbeat interval (%s)", gap, membersHeartbeat)
		}

		eventually(t, "5 members", func() error { return membersAre(etcdCtx(t), admin, c.Nodes) })

		// Gone again, for the checks of its free name below.
		if err := c.Kill(gone.Name); err != nil {
			t.Fatal(err)
		}

		converged(t, admin, cps, gone.Name, false, time.Now())
	})

	t.Run("names proven by certificates", func(t *testing.T) { checkNamesProven(t, c, workers[0], workers[1]) })
}

// membersAre checks that the endpoint lists exactly nodes, each with its
// role and address.
func membersAre(ctx context.Context, admin *client.Client, nodes []localcluster.Node) error {
	resp, err := membership.NewMembershipServiceClient(admin.Conn()).List(ctx, &membership.ListRequest{})
	if err != nil {
		return err
	}

	got := resp.GetMessages()[0].GetMembers()
	if len(got) != len(nodes) {
		return fmt.Errorf("%d members, want %d: %v", len(got), len(nodes), got)
	}

	for _, n := range nodes {
		role := "worker"
		if n.Type.IsControlPlane() {
			role = "controlplane"
		}

		if !slices.ContainsFunc(got, func(m *membership.Member) bool {
			return m.GetHostname() == n.Name && m.GetRole() == role && m.GetAddresses()[0] == n.Address && m.GetTimeSynced()
		}) {
			return fmt.Errorf("%s (%s, %s) missing: %v", n.Name, role, n.Address, got)
		}
	}

	return nil
}

// checkRoutingByName: a member's hostname routes `node` and `nodes` to it;
// a name no member has is refused.
func checkRoutingByName(t *testing.T, admin *client.Client, worker, cp localcluster.Node) {
	ctx := etcdCtx(t)

	var (
		resp *machine.HostnameResponse
		err  error
	)

	eventually(t, "node="+worker.Name, func() error {
		resp, err = admin.MachineClient.Hostname(client.WithNode(ctx, worker.Name), &emptypb.Empty{})
		if err == nil && resp.GetMessages()[0].GetHostname() != worker.Name {
			err = fmt.Errorf("answered by %v", resp)
		}

		return err
	})

	// Every control plane's apid learns the names within a heartbeat
	// interval of the member list being complete.
	eventually(t, "every member name known to the endpoint", func() error {
		resp, err = admin.MachineClient.Hostname(client.WithNodes(ctx, worker.Name, strings.ToUpper(cp.Name), worker.Address), &emptypb.Empty{})
		if err == nil && len(resp.GetMessages()) != 2 {
			err = fmt.Errorf("%d replies, want 2: %v", len(resp.GetMessages()), resp)
		}

		return err
	})

	for _, m := range resp.GetMessages() {
		if h := m.GetMetadata().GetHostname(); h != worker.Name && h != cp.Name {
			t.Errorf("reply tagged %q", h)
		}
	}

	_, err = admin.MachineClient.Hostname(client.WithNode(ctx, "no-such-member"), &emptypb.Empty{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "is neither this node") {
		t.Errorf("unknown name: %v, want Unavailable", err)
	}
}

// talosHealth runs ClusterService.HealthCheck through the Talos client's
// ClusterHealthCheck, as talosctl health --server does, and returns its progress messages.
func talosHealth(ctx context.Context, admin *client.Client, wait time.Duration) ([]string, error) {
	stream, err := admin.ClusterHealthCheck(ctx, wait, &clusterapi.ClusterInfo{})
	if err != nil {
		return nil, err
	}

	var msgs []string

	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}

		if err != nil {
			return msgs, err
		}

		msgs = append(msgs, msg.GetMessage())
	}
}
