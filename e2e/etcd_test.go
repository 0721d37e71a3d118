package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/etcdsnap"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// TestEtcdCluster runs one cluster of three control planes and a worker
// through etcd's life: formed by cluster create, a member killed, a control
// plane restarted, a snapshot taken by role, a member leaving and coming
// back; then the snapshot recovered into a fresh cluster. A revocation
// reaches the worker across a restart of every trustd.
func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	c := etcdCluster(t, "etcd", "127.9.8.0/24", 3, 1, false)
	admin := talosClient(t, c.ClientConfigPath())
	cps := c.ControlPlanes()
	worker := c.Nodes[3]
	names := []string{cps[0].Name, cps[1].Name, cps[2].Name}

	// The control planes boot together and join as learners at about the
	// same time. A member starting with an existing cluster asks every
	// other member for its version; one that has bound its peer port but
	// is still starting answers nothing, and each question then waits out
	// etcd's request timeout (7 s). The learners start one after the other,
	// so none is asked while it starts.
	t.Run("learners formed the cluster without waiting out each other", func(t *testing.T) {
		for _, cp := range cps {
			data, err := os.ReadFile(layout.Layout{State: c.StatePath(cp)}.ServiceLog("etcd"))
			if err != nil {
				t.Fatal(err)
			}

			for line := range strings.Lines(string(data)) {
				if strings.Contains(line, "failed to reach the peer URL") && strings.Contains(line, "deadline exceeded") {
					t.Errorf("%s: %s", cp.Name, line)
				}
			}
		}
	})

	t.Run("three voters through one endpoint", func(t *testing.T) {
		ctx := etcdCtx(t)

		resp, err := admin.MachineClient.EtcdMemberList(client.WithNodes(ctx, cps[0].Address, cps[1].Address, cps[2].Address, worker.Address),
			&machine.EtcdMemberListRequest{})
		if err != nil {
			t.Fatal(err)
		}

		if len(resp.GetMessages()) != 4 {
			t.Fatalf("%d replies, want 4", len(resp.GetMessages()))
		}

		for _, m := range resp.GetMessages() {
			md := m.GetMetadata()
			if md.GetHostname() == worker.Address {
				if status.FromProto(md.GetStatus()).Code() != codes.FailedPrecondition {
					t.Errorf("worker: %v, want its own FailedPrecondition", md)
				}

				continue
			}

			voters := 0
			for _, mb := range m.GetMembers() {
				if !mb.GetIsLearner() {
					voters++
				}
			}

			if md.GetError() != "" || voters != 3 || len(m.GetMembers()) != 3 { //nolint:staticcheck // the field apid fills
				t.Errorf("%s: %v", md.GetHostname(), m)
			}
		}

		for _, n := range cps {
			if st, healthy, _, err := etcdService(ctx, admin, n.Address); err != nil || st != "Running" || !healthy {
				t.Errorf("etcd on %s: %s healthy=%v %v", n.Name, st, healthy, err)
			}
		}
	})

	t.Run("etcd runs ahead of the node's other processes", func(t *testing.T) {
		for _, cp := range cps {
			checkEtcdNice(t, c.StatePath(cp))
		}
	})

	t.Run("peer port admits peers only", func(t *testing.T) { checkPeerPortAdmitsPeersOnly(t, c, cps[1]) })
	t.Run("revocation watch resumes across trustd restarts", func(t *testing.T) {
		checkRevocationWatchResumes(t, c, admin, cps, worker)
	})

	// A renewal recorded now lives through the restarts below and the
	// snapshot: the recovered cluster's revocation of the parent covers it.
	parent := newAdminCertificate(t, clusterAdmin(t, c), cps[0].Address)
	renewed := renewCertificate(t, parent, cps[0].Address)

	t.Run("maintenance", func(t *testing.T) { checkMaintenance(t, admin, cps) })
	t.Run("bootstrap refused", func(t *testing.T) { checkBootstrapRefused(t, admin, cps, worker) })
	t.Run("bad input", func(t *testing.T) { checkEtcdBadInput(t, admin, cps[0]) })
	t.Run("kill -9 keeps quorum", func(t *testing.T) { checkEtcdKilled(t, c, admin, cps, names) })
	t.Run("control plane restarted rejoins as itself", func(t *testing.T) { checkControlPlaneRestart(t, c, admin, cps, names) })

	snapshot := filepath.Join(t.TempDir(), "etcd.snapshot")
	t.Run("snapshot by role", func(t *testing.T) { checkSnapshotRoles(t, c, admin, cps[0], snapshot) })
	t.Run("leave and come back", func(t *testing.T) { checkLeave(t, c, admin, cps, names) })
	t.Run("removed member starts afresh", func(t *testing.T) { checkRemoved(t, admin, cps, names) })
	t.Run("recover into a new cluster", func(t *testing.T) { checkRecover(t, snapshot, parent, renewed) })
}

func checkBootstrapRefused(t *testing.T, admin *client.Client, cps []localcluster.Node, worker localcluster.Node) {
	ctx := etcdCtx(t)

	for _, tc := range []struct {
		node string
		want string
	}{
		{cps[0].Address, "already bootstrapped"},
		{cps[1].Address, "already bootstrapped"},
		{worker.Address, "control planes only"},
	} {
		err := admin.Bootstrap(client.WithNode(ctx, tc.node), &machine.BootstrapRequest{})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Bootstrap on %s: %v, want FailedPrecondition saying %q", tc.node, err, tc.want)
		}
	}
}

func checkEtcdBadInput(t *testing.T, admin *client.Client, cp localcluster.Node) {
	ctx := client.WithNode(etcdCtx(t), cp.Address)

	err := admin.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: 0x1234})
	if status.Code(err) != codes.NotFound {
		t.Errorf("removing an unknown member: %v, want NotFound", err)
	}

	for name, data := range map[string][]byte{
		"not a snapshot": bytes.Repeat([]byte("not etcd "), 1000),
		"empty":          nil,
	} {
		if _, err := admin.EtcdRecover(ctx, bytes.NewReader(data)); status.Code(err) != codes.InvalidArgument {
			t.Errorf("EtcdRecover of %s: %v, want InvalidArgument", name, err)
		}
	}

	// Nothing was touched: the member still serves.
	if _, err := admin.EtcdStatus(ctx); err != nil {
		t.Errorf("EtcdStatus after the refusals: %v", err)
	}
}

// checkEtcdKilled kills a follower's etcd (a leader's death adds an
// election, not a loss of quorum): the other two keep taking writes, and
// the service starts the member again from its data.
func checkEtcdKilled(t *testing.T, c *localcluster.Cluster, admin *client.Client, cps []localcluster.Node, names []string) {
	ctx := etcdCtx(t)

	victim, writer := follower(t, admin, cps)

	_, _, pid, err := etcdService(ctx, admin, victim.Address)
	if err != nil || pid == 0 {
		t.Fatalf("etcd PID on %s: %d %v", victim.Name, pid, err)
	}

	if err = syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	kv := etcdClient(t, c, writer)

	eventually(t, "a write with one member down", func() error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()

		_, err := kv.Put(wctx, "aegis/e2e/after-kill", "written")

		return err
	})

	eventually(t, "etcd restarted and healthy", func() error {
		st, healthy, newPID, err := etcdService(ctx, admin, victim.Address)
		if err == nil && (st != "Running" || !healthy || newPID == pid) {
			err = errors.New(st)
		}

		return err
	})

	if err = votersAre(ctx, admin, cps[0].Address, names...); err != nil {
		t.Fatal(err)
	}
}

// follower returns a control plane whose member does not lead, and another.
func follower(t *testing.T, admin *client.Client, cps []localcluster.Node) (victim, other localcluster.Node) {
	t.Helper()

	ctx := etcdCtx(t)

	st, err := admin.EtcdStatus(client.WithNode(ctx, cps[0].Address))
	if err != nil {
		t.Fatal(err)
	}

	ms, err := members(ctx, admin, cps[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	leader := st.GetMessages()[0].GetMemberStatus().GetLeader()

	for i, n := range cps {
		if ms[n.Name].GetId() != leader {
			return n, cps[(i+1)%len(cps)]
		}
	}

	t.Fatalf("every member leads? %v", ms)

	return
}

func checkControlPlaneRestart(t *testing.T, c *localcluster.Cluster, admin *client.Client, cps []localcluster.Node, names []string) {
	ctx := etcdCtx(t)

	before, err := members(ctx, admin, cps[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	if err = c.StopNode(cps[1].Name); err != nil {
		t.Fatal(err)
	}

	// With one of three members down, another leaving would break quorum.
	err = admin.EtcdLeaveCluster(client.WithNode(ctx, cps[2].Address), &machine.EtcdLeaveClusterRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "quorum") {
		t.Errorf("leaving with a member down: %v, want FailedPrecondition about quorum", err)
	}

	if _, err = c.StartNode(ctx, cps[1].Name, etcdTimeout); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the restarted control plane's etcd is healthy", func() error {
		st, healthy, _, err := etcdService(ctx, admin, cps[1].Address)
		if err == nil && (st != "Running" || !healthy) {
			err = errors.New(st)
		}

		return err
	})

	if err = votersAre(ctx, admin, cps[0].Address, names...); err != nil {
		t.Fatal(err)
	}

	after, _ := members(ctx, admin, cps[0].Address)
	if after[cps[1].Name].GetId() != before[cps[1].Name].GetId() {
		t.Errorf("member ID changed from %x to %x", before[cps[1].Name].GetId(), after[cps[1].Name].GetId())
	}
}

func checkSnapshotRoles(t *testing.T, c *localcluster.Cluster, admin *client.Client, cp localcluster.Node, path string) {
	ctx := etcdCtx(t)

	if _, err := etcdClient(t, c, cp).Put(ctx, "aegis/e2e/before-snapshot", "kept"); err != nil {
		t.Fatal(err)
	}

	reader := roleClient(t, admin, cp.Address, "os:reader")
	if rc, err := reader.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{}); err == nil {
		_, err = io.Copy(io.Discard, rc)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("snapshot as os:reader: %v, want PermissionDenied", err)
		}
	} else if status.Code(err) != codes.PermissionDenied {
		t.Errorf("snapshot as os:reader: %v, want PermissionDenied", err)
	}

	backup := roleClient(t, admin, cp.Address, "os:etcd:backup")

	rc, err := backup.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}

	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	info, err := etcdsnap.Check(path)
	if err != nil || info.Revision == 0 {
		t.Fatalf("snapshot: %+v %v", info, err)
	}

	// A truncated copy is refused before anything is touched.
	if _, err = admin.EtcdRecover(client.WithNode(ctx, cp.Address), bytes.NewReader(data[:len(data)-100])); status.Code(err) != codes.InvalidArgument {
		t.Errorf("EtcdRecover of a truncated snapshot: %v, want InvalidArgument", err)
	}
}

func checkLeave(t *testing.T, c *localcluster.Cluster, admin *client.Client, cps []localcluster.Node, names []string) {
	ctx := etcdCtx(t)
	leaving := cps[2]

	before, err := members(ctx, admin, cps[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	if err = admin.EtcdLeaveCluster(client.WithNode(ctx, leaving.Address), &machine.EtcdLeaveClusterRequest{}); err != nil {
		t.Fatal(err)
	}

	if err = votersAre(ctx, admin, cps[0].Address, names[:2]...); err != nil {
		t.Fatal(err)
	}

	if st, _, _, err := etcdService(ctx, admin, leaving.Address); err != nil || st == "Running" {
		t.Errorf("etcd of the node that left: %s %v", st, err)
	}

	if _, err = os.Stat(filepath.Join(c.StatePath(leaving), "etcd", "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data of the node that left: %v, want it removed", err)
	}

	if err = admin.Reboot(client.WithNode(ctx, leaving.Address)); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the node that left votes again", func() error { return votersAre(ctx, admin, cps[0].Address, names...) })

	after, _ := members(ctx, admin, cps[0].Address)
	if after[leaving.Name].GetId() == before[leaving.Name].GetId() {
		t.Errorf("the member that left came back with its old ID %x", after[leaving.Name].GetId())
	}
}

// checkRecover recovers the snapshot into a new cluster of one control
// plane: the keys written before it are there, and so is the lineage of a
// renewal recorded before it (revoking the parent covers the child).
func checkRecover(t *testing.T, snapshot string, parent, renewed revokedCert) {
	c := etcdCluster(t, "recover", "127.9.9.0/24", 1, 0, true)
	admin := talosClient(t, c.ClientConfigPath())
	cp := c.ControlPlanes()[0]
	ctx := client.WithNode(etcdCtx(t), cp.Address)

	if err := admin.Bootstrap(ctx, &machine.BootstrapRequest{RecoverEtcd: true}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("recover without a snapshot: %v, want FailedPrecondition", err)
	}

	f, err := os.Open(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if _, err = admin.EtcdRecover(ctx, f); err != nil {
		t.Fatal(err)
	}

	if err = admin.Bootstrap(ctx, &machine.BootstrapRequest{RecoverEtcd: true}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the recovered member is healthy", func() error {
		st, healthy, _, err := etcdService(ctx, admin, cp.Address)
		if err == nil && (st != "Running" || !healthy) {
			err = errors.New(st)
		}

		return err
	})

	resp, err := etcdClient(t, c, cp).Get(ctx, "aegis/e2e/before-snapshot")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept" {
		t.Fatalf("the key written before the snapshot: %v %v", resp, err)
	}

	if err = votersAre(ctx, admin, cp.Address, cp.Name); err != nil {
		t.Error(err)
	}

	rev, err := revocations.NewRevocationServiceClient(clusterAdmin(t, c).conn(t, cp.Address)).Revoke(ctx,
		&revocations.RevokeRequest{Serial: parent.leaf.SerialNumber.Text(16), NotAfter: timestamppb.New(parent.leaf.NotAfter)})
	if err != nil {
		t.Fatal(err)
	}

	if d := rev.GetMessages()[0].GetDescendants(); len(d) != 1 || d[0].GetSerial() != renewed.leaf.SerialNumber.Text(16) {
		t.Errorf("after the restore, the revocation of %s covers %v, want the certificate renewed from it before the snapshot",
			parent.leaf.SerialNumber.Text(16), d)
	}

	err = admin.EtcdLeaveCluster(ctx, &machine.EtcdLeaveClusterRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("the only member leaving: %v, want FailedPrecondition", err)
	}
}

// checkRemoved removes a running member by its ID through another node:
// the removed member's etcd stops, drops its data and joins again as a new
// member, promoted once caught up.
func checkRemoved(t *testing.T, admin *client.Client, cps []localcluster.Node, names []string) {
	ctx := etcdCtx(t)
	removed := cps[1]

	before, err := members(ctx, admin, cps[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	id := before[removed.Name].GetId()

	// etcd refuses a removal until every voter has been connected for a
	// while (the member that just rejoined, here): FailedPrecondition.
	eventually(t, "the removal accepted", func() error {
		err := admin.EtcdRemoveMemberByID(client.WithNode(ctx, cps[0].Address), &machine.EtcdRemoveMemberByIDRequest{MemberId: id})
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			t.Fatal(err)
		}

		return err
	})

	eventually(t, "the removed node votes again under a new ID", func() error {
		if err := votersAre(ctx, admin, cps[0].Address, names...); err != nil {
			return err
		}

		if after, _ := members(ctx, admin, cps[0].Address); after[removed.Name].GetId() == id {
			return errors.New("still the old member ID")
		}

		return nil
	})
}

// checkMaintenance: every member reports the same leader; the leader hands
// leadership on; defragment and the alarm calls answer.
func checkMaintenance(t *testing.T, admin *client.Client, cps []localcluster.Node) {
	ctx := etcdCtx(t)

	resp, err := admin.EtcdStatus(client.WithNodes(ctx, cps[0].Address, cps[1].Address, cps[2].Address))
	if err != nil || len(resp.GetMessages()) != 3 {
		t.Fatalf("EtcdStatus: %v %v", resp, err)
	}

	leader, leaderNode := resp.GetMessages()[0].GetMemberStatus().GetLeader(), ""

	for _, m := range resp.GetMessages() {
		st := m.GetMemberStatus()
		if st.GetLeader() != leader || st.GetIsLearner() || len(st.GetErrors()) > 0 {
			t.Fatalf("status of %s: %v", m.GetMetadata().GetHostname(), st)
		}

		if st.GetMemberId() == leader {
			leaderNode = m.GetMetadata().GetHostname() // apid tags each reply with its node's address
		}
	}

	if leaderNode == "" {
		t.Fatalf("no node is the leader %x", leader)
	}

	moved, err := admin.EtcdForfeitLeadership(client.WithNode(ctx, leaderNode), &machine.EtcdForfeitLeadershipRequest{})
	if err != nil || moved.GetMessages()[0].GetMember() == "" {
		t.Fatalf("EtcdForfeitLeadership on the leader: %v %v", moved, err)
	}

	node := client.WithNode(ctx, cps[0].Address)

	if _, err = admin.EtcdDefragment(node); err != nil {
		t.Errorf("EtcdDefragment: %v", err)
	}

	if alarms, err := admin.EtcdAlarmList(node); err != nil || len(alarms.GetMessages()[0].GetMemberAlarms()) != 0 {
		t.Errorf("EtcdAlarmList: %v %v", alarms, err)
	}

	if _, err = admin.EtcdAlarmDisarm(node); err != nil {
		t.Errorf("EtcdAlarmDisarm: %v", err)
	}
}
