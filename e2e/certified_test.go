package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/certs"
	clustercheck "github.com/aegis-os/aegis/client/cluster"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// certifiedCIDR holds the cluster of TestCertifiedAndRemove.
const certifiedCIDR = "127.9.52.0/24"

// TestCertifiedAndRemove runs one control plane and two workers: every
// node that holds a certificate is listed as certified and the client
// check finds nothing missing; a live worker and the control plane cannot
// be removed; a killed worker, once aged out of the member list, is named
// by the client check and by the rotations that would change it (refused,
// dry runs included), removed with aegisctl and no longer certified. The
// OS CA then rotates without it; started again as it was, it is left
// behind, and `aegisctl cluster readmit` brings it back.
func TestCertifiedAndRemove(t *testing.T) {
	needBinaries(t)
	t.Parallel()

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "cert", ControlPlanes: 1, Workers: 2, CIDR: netip.MustParsePrefix(certifiedCIDR),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: etcdTimeout, HeartbeatInterval: membersHeartbeat,
		Runtime: certs.RuntimeProcess,
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
	mc := membership.NewMembershipServiceClient(admin.Conn())
	cp := c.ControlPlanes()[0]
	gone := c.Nodes[len(c.Nodes)-1]
	ctx := etcdCtx(t)

	eventually(t, "3 members", func() error { return membersAre(ctx, admin, c.Nodes) })
	eventually(t, "3 certified", func() error { return certifiedAre(ctx, mc, c.Nodes) })

	if err := clusterCheck(ctx, mc); err != nil {
		t.Fatalf("client check after create: %v", err)
	}

	for _, refused := range []struct{ node, text string }{
		{gone.Name, gone.Name + " (" + gone.Address + ") is connected to a control plane"},
		{cp.Address, cp.Name + " (" + cp.Address + ") is a control plane; it leaves the cluster through etcd's member removal"},
	} {
		_, err := mc.Remove(ctx, &membership.RemoveRequest{Node: refused.node})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), refused.text) {
			t.Fatalf("Remove(%s): %v, want FailedPrecondition with %q", refused.node, err, refused.text)
		}

		t.Logf("Remove(%s) refused: %s", refused.node, status.Convert(err).Message())
	}

	if err := c.Kill(gone.Name); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	rest := slices.DeleteFunc(slices.Clone(c.Nodes), func(n localcluster.Node) bool { return n.Name == gone.Name })

	eventually(t, gone.Name+" aged out", func() error { return membersAre(ctx, admin, rest) })

	err = clusterCheck(ctx, mc)
	if !errors.Is(err, clustercheck.ErrMissing) || !strings.Contains(err.Error(), "worker "+gone.Name+" ("+gone.Address+") holds a certificate") ||
		!strings.Contains(err.Error(), "aegisctl members remove "+gone.Name) {
		t.Fatalf("client check with %s gone: %v, want it named", gone.Name, err)
	}

	t.Logf("%s aged out %s after it was killed; the client check says:\n%v", gone.Name, time.Since(killed).Round(100*time.Millisecond), err)

	// Every cluster-wide procedure that would change the gone worker
	// refuses, its dry run included, naming it; the etcd CA's concerns
	// only the control planes and goes on.
	for _, args := range [][]string{{"rotate-ca"}, {"rotate-ca", "--dry-run=false"}, {"token", "rotate-static"}} {
		out, err := aegisctl(t, c.Dir, args...)
		if err == nil || !strings.Contains(out, "worker "+gone.Name+" ("+gone.Address+") holds a certificate") ||
			!strings.Contains(out, "aegisctl members remove "+gone.Name) {
			t.Fatalf("aegisctl %s with %s gone: %v, want a refusal naming it\n%s", strings.Join(args, " "), gone.Name, err, out)
		}
	}

	if out, err := aegisctl(t, c.Dir, "rotate-ca", "--ca", "etcd"); err != nil {
		t.Fatalf("rotate-ca --ca etcd (dry run) with a worker gone: %v\n%s", err, out)
	}

	out, err := aegisctl(t, c.Dir, "members", "remove", gone.Name)
	if err != nil || !strings.Contains(out, "removed "+gone.Name+" ("+gone.Address+"): ") || !strings.Contains(out, "name released") {
		t.Fatalf("members remove %s: %v\n%s", gone.Name, err, out)
	}

	t.Logf("aegisctl members remove %s: %s", gone.Name, out)

	if err := certifiedAre(ctx, mc, rest); err != nil {
		t.Fatalf("after the removal: %v", err)
	}

	if err := clusterCheck(ctx, mc); err != nil {
		t.Fatalf("client check after the removal: %v", err)
	}

	if out, err := aegisctl(t, c.Dir, "rotate-ca"); err != nil {
		t.Fatalf("rotate-ca (dry run) after the removal: %v\n%s", err, out)
	}

	// The rotation goes on without the removed worker. Started again as it
	// was, it is left behind: it trusts only the old CA. Readmitted from the
	// rotated bundle, it is back under its name and address.
	if out, err := aegisctl(t, c.Dir, "rotate-ca", "--dry-run=false", "--secrets", c.SecretsPath()); err != nil {
		t.Fatalf("rotate-ca with %s removed: %v\n%s", gone.Name, err, out)
	}

	// The client config now holds a certificate of the new CA.
	admin = talosClient(t, c.ClientConfigPath())
	mc = membership.NewMembershipServiceClient(admin.Conn())

	leftBehind(ctx, t, c, admin, gone, rest)

	readmitted := time.Now()

	out, err = aegisctl(t, c.Dir, "cluster", "readmit", gone.Name, "--name", c.Name, "--state-dir", filepath.Dir(c.Dir))
	if err != nil || !strings.Contains(out, gone.Name+" ("+gone.Address+") is back") {
		t.Fatalf("cluster readmit %s: %v\n%s", gone.Name, err, out)
	}

	t.Logf("aegisctl cluster readmit %s (%s): %s", gone.Name, time.Since(readmitted).Round(100*time.Millisecond), out)

	reloaded, err := localcluster.Load(filepath.Dir(c.Dir), c.Name)
	if err != nil {
		t.Fatal(err)
	}

	*c = *reloaded // the readmitted node's new process, for Destroy

	if out, err := aegisctl(t, c.Dir, "-n", strings.Join(c.Addresses(), ","), "version"); err != nil {
		t.Fatalf("version on every node with the rotated client config: %v\n%s", err, out)
	}

	eventually(t, gone.Name+" certified again", func() error { return certifiedAre(ctx, mc, c.Nodes) })

	if err := clusterCheck(ctx, mc); err != nil {
		t.Fatalf("client check after the readmission: %v", err)
	}
}

// leftBehind starts gone again with the config and state it had before the
// rotation, and checks that it stays out: no member, unreachable through
// the control plane, and its log says why.
func leftBehind(ctx context.Context, t *testing.T, c *localcluster.Cluster, admin *client.Client, gone localcluster.Node, rest []localcluster.Node) {
	t.Helper()

	if _, err := c.StartNode(ctx, gone.Name, waitTimeout); err != nil {
		t.Logf("%s started with its old config: %v", gone.Name, err)
	}

	time.Sleep(4 * membersHeartbeat)

	// The nodes that took part are members, their certificates in use:
	// a worker's kept connection to trustd made with its certificate of
	// the old CA must not outlive the rotation.
	if err := membersAre(ctx, admin, rest); err != nil {
		t.Fatalf("after the rotation, with %s left behind: %v", gone.Name, err)
	}

	for _, n := range rest {
		list, err := admin.ServiceList(client.WithNode(ctx, n.Address))
		if err != nil {
			t.Fatal(err)
		}

		for _, s := range list.GetMessages()[0].GetServices() {
			if s.GetId() != "etcd" && (s.GetState() != "Running" || !s.GetHealth().GetHealthy()) {
				t.Fatalf("%s after the rotation: %s is %s (healthy %v: %s)", n.Name, s.GetId(), s.GetState(), s.GetHealth().GetHealthy(), s.GetHealth().GetLastMessage())
			}
		}
	}

	if out, err := aegisctl(t, c.Dir, "-n", gone.Address, "version"); err == nil {
		t.Fatalf("%s answers the rotated client config before its readmission:\n%s", gone.Name, out)
	}

	tail := c.Tail(gone, 15)
	if !strings.Contains(tail, "trustd serves a certificate of a CA this node does not accept") || !strings.Contains(tail, "aegisctl cluster readmit") {
		t.Fatalf("%s, left behind, does not say why:\n%s", gone.Name, tail)
	}

	t.Logf("%s left behind:\n%s", gone.Name, tail)
}

// certifiedAre checks that the endpoint lists exactly nodes as holding
// live certificates, each with its role and address, a worker's with
// its certificate's end.
func certifiedAre(ctx context.Context, mc membership.MembershipServiceClient, nodes []localcluster.Node) error {
	resp, err := mc.Certified(ctx, &membership.CertifiedRequest{})
	if err != nil {
		return err
	}

	got := resp.GetMessages()[0].GetNodes()
	if len(got) != len(nodes) {
		return fmt.Errorf("%d certified nodes, want %d: %v", len(got), len(nodes), got)
	}

	for _, n := range nodes {
		role := clustercheck.RoleWorker
		if n.Type.IsControlPlane() {
			role = clustercheck.RoleControlPlane
		}

		if !slices.ContainsFunc(got, func(c *membership.CertifiedNode) bool {
			return c.GetHostname() == n.Name && c.GetRole() == role && slices.Contains(c.GetAddresses(), n.Address) &&
				(role == clustercheck.RoleControlPlane) == (c.GetNotAfter() == nil)
		}) {
			return fmt.Errorf("%s (%s, %s) not certified: %v", n.Name, role, n.Address, got)
		}
	}

	return nil
}

// clusterCheck runs the client-side check on the endpoint's two lists.
func clusterCheck(ctx context.Context, mc membership.MembershipServiceClient) error {
	list, err := mc.List(ctx, &membership.ListRequest{})
	if err != nil {
		return err
	}

	certified, err := mc.Certified(ctx, &membership.CertifiedRequest{})
	if err != nil {
		return err
	}

	return clustercheck.Check(list.GetMessages()[0], certified.GetMessages()[0])
}
