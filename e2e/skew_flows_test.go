//go:build skew

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/localcluster"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
)

// skewMixed is TestSkew's mixed cluster: oldCP and oldWorker still run the
// previous release, newCP and newWorker the current build.
type skewMixed struct {
	b                    skewBuilds
	c                    *localcluster.Cluster
	a                    admin
	cli                  *client.Client
	oldCP, newCP         localcluster.Node
	oldWorker, newWorker localcluster.Node
	// conns are the admin's connections to the nodes' apids, by name, made
	// once: apid keeps apid.MaxConnectionsPerSource open per source.
	conns map[string]*grpc.ClientConn
}

// conn is the admin's connection to n's apid.
func (m skewMixed) conn(t *testing.T, n localcluster.Node) *grpc.ClientConn {
	t.Helper()

	c, ok := m.conns[n.Name]
	if !ok {
		t.Fatalf("no connection to %s made before the checks", n.Name)
	}

	return c
}

// versionOf is the version n runs in the mixed cluster.
func (m skewMixed) versionOf(n localcluster.Node) string {
	if n.Name == m.newCP.Name || n.Name == m.newWorker.Name {
		return m.b.newVersion
	}

	return m.b.oldVersion
}

// machineVia is a MachineService client of via's apid.
func (m skewMixed) machineVia(t *testing.T, via localcluster.Node) machine.MachineServiceClient {
	return machine.NewMachineServiceClient(m.conn(t, via))
}

// checkRouting: an old control plane's apid routes Version and ServiceList
// to the new worker, the new control plane's to the old worker, and each
// fans Version out to every node.
func (m skewMixed) checkRouting(t *testing.T) {
	for _, r := range [][2]localcluster.Node{{m.oldCP, m.newWorker}, {m.newCP, m.oldWorker}} {
		via, to := r[0], r[1]
		ctx := client.WithNode(etcdCtx(t), to.Address)
		where := fmt.Sprintf("%s (%s) through %s's apid (%s)", to.Name, m.versionOf(to), via.Name, m.versionOf(via))

		resp, err := m.machineVia(t, via).Version(ctx, &emptypb.Empty{})
		if err != nil {
			t.Errorf("Version of %s: %v", where, err)

			continue
		}

		if got, _, _ := version.FromTalosTag(resp.GetMessages()[0].GetVersion().GetTag()); got != m.versionOf(to) {
			t.Errorf("Version of %s answered %s, want %s", where, got, m.versionOf(to))
		}

		list, err := m.machineVia(t, via).ServiceList(ctx, &emptypb.Empty{})
		if err != nil || !allRunning(list) {
			t.Errorf("ServiceList of %s: %v (services %v), want every service up", where, err, serviceStates(list))
		}
	}

	for _, via := range []localcluster.Node{m.oldCP, m.newCP} {
		m.checkFanOut(t, via)
	}
}

// checkFanOut: Version with `nodes` naming every node, through via, answers
// from each node with its own version.
func (m skewMixed) checkFanOut(t *testing.T, via localcluster.Node) {
	want := map[string]string{}
	for _, n := range m.c.Nodes {
		want[n.Address] = m.versionOf(n)
	}

	resp, err := m.machineVia(t, via).Version(client.WithNodes(etcdCtx(t), m.c.Addresses()...), &emptypb.Empty{})
	if err != nil {
		t.Errorf("Version fanned out through %s's apid (%s): %v", via.Name, m.versionOf(via), err)

		return
	}

	for _, msg := range resp.GetMessages() {
		node := msg.GetMetadata().GetHostname()
		got, _, _ := version.FromTalosTag(msg.GetVersion().GetTag())

		if e := msg.GetMetadata().GetError(); e != "" || got != want[node] {
			t.Errorf("Version fanned out through %s's apid: %s answered %q (error %q), want %s", via.Name, node, got, e, want[node])
		}

		delete(want, node)
	}

	if len(want) != 0 {
		t.Errorf("Version fanned out through %s's apid: no reply from %v", via.Name, want)
	}
}

// checkRenewals: both workers renew their node certificates while the
// cluster is mixed: the certificate each one's apid serves changes.
func (m skewMixed) checkRenewals(t *testing.T) {
	since := time.Now()

	for _, w := range []localcluster.Node{m.oldWorker, m.newWorker} {
		first, err := m.a.servedCertificate(w.Address)
		if err != nil {
			t.Fatalf("%s's served certificate: %v", w.Name, err)
		}

		eventually(t, w.Name+" ("+m.versionOf(w)+") renewed its certificate in the mixed cluster", func() error {
			cert, err := m.a.servedCertificate(w.Address)
			if err == nil && cert.SerialNumber.Cmp(first.SerialNumber) == 0 {
				err = fmt.Errorf("still serves the certificate %s, valid until %s", first.SerialNumber.Text(16),
					first.NotAfter.Format(time.TimeOnly))
			}

			return err
		})

		t.Logf("%s (%s) renewed %s after the check began", w.Name, m.versionOf(w), time.Since(since).Round(time.Second))
	}
}

// checkHeartbeats: the member list, read through an old and through the
// new control plane, has every node with its version and its heartbeat
// interval, and a last_seen written after the check began, or, for a
// worker whose heartbeats a control plane of this build takes, its entry
// held by its connection. A heartbeat rewrites last_seen only every
// membership.LastSeenRefresh (between, it renews the entry's lease), so
// that is the longest the check waits.
func (m skewMixed) checkHeartbeats(t *testing.T) {
	since := time.Now()

	for _, via := range []localcluster.Node{m.oldCP, m.newCP} {
		eventually(t, "every node seen again in the member list read through "+via.Name+" ("+m.versionOf(via)+")", func() error {
			return m.membersSeenSince(t, via, since)
		})

		t.Logf("every node seen again, read through %s (%s), %s after the check began", via.Name, m.versionOf(via),
			time.Since(since).Round(100*time.Millisecond))
	}
}

// membersSeenSince lists the members through via's apid and checks each
// node was seen after since.
func (m skewMixed) membersSeenSince(t *testing.T, via localcluster.Node, since time.Time) error {
	resp, err := membership.NewMembershipServiceClient(m.conn(t, via)).List(etcdCtx(t), &membership.ListRequest{})
	if err != nil {
		return err
	}

	got := map[string]*membership.Member{}
	for _, mem := range resp.GetMessages()[0].GetMembers() {
		got[mem.GetHostname()] = mem
	}

	var problems []string

	for _, n := range m.c.Nodes {
		mem, ok := got[n.Name]

		switch seen := mem.GetLastSeen().AsTime(); {
		case !ok:
			problems = append(problems, n.Name+" missing")
		case mem.GetVersion() != m.versionOf(n):
			problems = append(problems, fmt.Sprintf("%s listed on %s, runs %s", n.Name, mem.GetVersion(), m.versionOf(n)))
		case mem.GetHeld():
			// Held by the worker's connection to a control plane of this
			// build, whatever the worker's version: its interval is the
			// hold's, and last_seen is rewritten only now and then.
			if mem.GetInterval().AsDuration() != membershippkg.HeldInterval || mem.GetRole() != membershippkg.RoleWorker {
				problems = append(problems, fmt.Sprintf("%s held as %s, every %s", n.Name, mem.GetRole(), mem.GetInterval().AsDuration()))
			}
		case mem.GetInterval().AsDuration() != skewHeartbeat:
			problems = append(problems, fmt.Sprintf("%s beats every %s, want %s", n.Name, mem.GetInterval().AsDuration(), skewHeartbeat))
		case !seen.After(since):
			problems = append(problems, fmt.Sprintf("%s last seen %s before the check began", n.Name, since.Sub(seen).Round(time.Millisecond)))
		}
	}

	if len(problems) != 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}

	return nil
}

// checkJoins: a node of the current build joins through the old control
// plane's trustd with a token created through the new control plane, and a
// node of the previous release through the new control plane's with one
// created through an old one; each token is then counted used.
func (m skewMixed) checkJoins(t *testing.T) {
	joins := []struct {
		name, bin, v string
		tokenBy, via localcluster.Node
	}{
		{"skew-join-new", m.b.newBin, m.b.newVersion, m.newCP, m.oldCP},
		{"skew-join-old", m.b.oldBin, m.b.oldVersion, m.oldCP, m.newCP},
	}

	for _, j := range joins {
		t.Run(j.name, func(t *testing.T) {
			tok := createClusterToken(t, m.a, j.tokenBy, 1)
			id, _, _ := strings.Cut(tok, ".")
			start := time.Now()

			n := m.addNode(t, j.name, j.bin, tok, j.via)
			waitVersion(t, m.cli, n.Address, j.v)
			t.Logf("%s (%s) joined through %s (%s) in %s", n.Name, j.v, j.via.Name, m.versionOf(j.via), time.Since(start).Round(time.Millisecond))

			if uses := eventuallyTokenUses(t, m.a, j.via)[id]; uses != 1 {
				t.Errorf("the token %s created through %s: %d uses after %s joined, want 1", id, j.tokenBy.Name, uses, n.Name)
			}
		})
	}
}

// addNode adds a worker that runs bin's machined and joins with tok through
// via's trustd only.
func (m skewMixed) addNode(t *testing.T, name, bin, tok string, via localcluster.Node) localcluster.Node {
	t.Helper()

	addr := netip.MustParsePrefix(skewCIDR).Addr()
	for range len(m.c.Nodes) + 2 {
		addr = addr.Next()
	}

	keep := m.c.BinDir
	m.c.BinDir = bin
	defer func() { m.c.BinDir = keep }()

	n, err := m.c.AddNode(context.Background(), localcluster.NodeSpec{
		Name: name, Type: certs.NodeWorker, Address: addr.String(),
		Configure: func(cfg *certs.MachineConfig) {
			cfg.Machine.Token = tok
			cfg.Cluster.ControlPlane.Endpoints = []string{via.Address}
		},
	}, etcdTimeout)
	if err != nil {
		t.Fatalf("%s joining through %s (%s): %v", name, via.Name, m.versionOf(via), err)
	}

	return n
}

// checkRevocation: a client certificate revoked through one version's
// control plane is refused by the other version's apids, on a connection
// they served before the revocation and at a new handshake.
func (m skewMixed) checkRevocation(t *testing.T) {
	for _, r := range []struct {
		by        localcluster.Node
		refusedBy []localcluster.Node
	}{
		{m.newCP, []localcluster.Node{m.oldCP, m.oldWorker}},
		{m.oldCP, []localcluster.Node{m.newCP, m.newWorker}},
	} {
		t.Run("revoked through "+r.by.Name, func(t *testing.T) {
			m.checkRevokedAcross(t, r.by, r.refusedBy)
		})
	}
}

// checkRevokedAcross revokes a new admin certificate through by and checks
// each of refusedBy refuses it.
func (m skewMixed) checkRevokedAcross(t *testing.T, by localcluster.Node, refusedBy []localcluster.Node) {
	victim := newAdminCertificate(t, m.a, by.Address)
	conns := map[string]*grpc.ClientConn{}

	for _, n := range refusedBy {
		conns[n.Name] = victim.conn(t, n.Address)
		if _, err := machine.NewMachineServiceClient(conns[n.Name]).Version(etcdCtx(t), &emptypb.Empty{}); err != nil {
			t.Fatalf("%s (%s) before the revocation: %v", n.Name, m.versionOf(n), err)
		}
	}

	_, err := revocations.NewRevocationServiceClient(m.conn(t, by)).Revoke(etcdCtx(t), &revocations.RevokeRequest{
		Serial: victim.leaf.SerialNumber.Text(16), NotAfter: timestamppb.New(victim.leaf.NotAfter), Reason: "skew",
	})
	if err != nil {
		t.Fatalf("revoking through %s (%s): %v", by.Name, m.versionOf(by), err)
	}

	revoked := time.Now()

	for _, n := range refusedBy {
		waitCallRefused(t, conns[n.Name], n.Name+" ("+m.versionOf(n)+")", revoked)
		checkHandshakeRefused(t, victim, n)
	}
}
