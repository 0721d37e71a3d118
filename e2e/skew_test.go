//go:build skew

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/machined/localcluster"
)

// skewCIDR is the loopback range of TestSkew's cluster.
const skewCIDR = "127.9.64.0/24"

// skewCertTTL is the node certificates' lifetime in the mixed cluster: the
// least trustd signs, so that both workers renew (at half life) while the
// cluster is mixed.
const skewCertTTL = time.Minute

// skewHeartbeat is every node's heartbeat interval: a node rewrites its
// member entry's last_seen every 12 s (membership.LastSeenRefresh).
const skewHeartbeat = 2 * time.Second

// skewBuilds are the two builds of TestSkew, which `make skew` passes in
// the environment: the previous release's node binaries and the current
// build (`make build`'s bin), each with the version stamped into it.
type skewBuilds struct {
	oldBin, oldVersion string
	newBin, newVersion string
}

// skewBuildsFromEnv reads the builds from the environment and fails the
// test when one is missing: TestSkew is compiled only with the skew tag,
// which `make skew` gives along with the builds.
func skewBuildsFromEnv(t *testing.T) skewBuilds {
	t.Helper()

	b := skewBuilds{
		oldBin: os.Getenv("AEGIS_SKEW_OLD_BIN"), oldVersion: os.Getenv("AEGIS_SKEW_OLD_VERSION"),
		newBin: os.Getenv("AEGIS_SKEW_NEW_BIN"), newVersion: os.Getenv("AEGIS_SKEW_NEW_VERSION"),
	}

	for name, v := range map[string]string{
		"AEGIS_SKEW_OLD_BIN": b.oldBin, "AEGIS_SKEW_OLD_VERSION": b.oldVersion,
		"AEGIS_SKEW_NEW_BIN": b.newBin, "AEGIS_SKEW_NEW_VERSION": b.newVersion,
	} {
		if v == "" {
			t.Fatalf("%s is not set: run `make skew`, which builds the previous release (SKEW_FROM) and this tree and sets it", name)
		}
	}

	for _, p := range []string{filepath.Join(b.oldBin, "machined"), filepath.Join(b.newBin, "aegisctl"), filepath.Join(b.newBin, "images")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%v: run `make skew`, which builds both versions", err)
		}
	}

	return b
}

// phases logs how long each phase of a test took.
type phases struct {
	t     *testing.T
	start time.Time
	last  time.Time
	done  []string
}

func newPhases(t *testing.T) *phases {
	now := time.Now()

	p := &phases{t: t, start: now, last: now}
	t.Cleanup(func() {
		t.Logf("skew figures: %s; %s in all", strings.Join(p.done, ", "), time.Since(p.start).Round(time.Second))
	})

	return p
}

// end logs the phase that ends now.
func (p *phases) end(name string) {
	now := time.Now()
	took := now.Sub(p.last).Round(100 * time.Millisecond)
	p.last = now
	p.done = append(p.done, fmt.Sprintf("%s %s", name, took))
	p.t.Logf("phase %q took %s", name, took)
}

// TestSkew tests the version-skew policy (internal/version/skew.go) with two
// real builds: a cluster of three control planes and two workers created on
// the previous release, one control plane and one worker upgraded to the
// current build; then, across the versions, routing, renewals, heartbeats,
// joins and revocation each work; then `aegisctl upgrade` takes the rest to
// the current build with the cluster's etcd data intact. Run by `make skew`.
func TestSkew(t *testing.T) {
	b := skewBuildsFromEnv(t)
	ph := newPhases(t)

	c := upgradeCluster(t, localcluster.Options{
		Name: "skew", ControlPlanes: 3, Workers: 2, CIDR: netip.MustParsePrefix(skewCIDR),
		BinDir: b.oldBin, UpgradeTrial: time.Minute, NodeCertTTL: skewCertTTL, HeartbeatInterval: skewHeartbeat,
	})

	cli := talosClient(t, c.ClientConfigPath())
	a := clusterAdmin(t, c)
	cps := c.ControlPlanes()

	for _, n := range c.Nodes {
		waitVersion(t, cli, n.Address, b.oldVersion)
	}

	ph.end("cluster created on " + b.oldVersion)

	createClusterToken(t, a, cps[0], 3)
	tokensBefore := eventuallyTokenUses(t, a, cps[0])
	bundle := writeBundle(t, b.newBin, b.newVersion)

	m := skewMixed{b: b, c: c, a: a, cli: cli,
		oldCP: cps[0], newCP: cps[2], oldWorker: c.Nodes[3], newWorker: c.Nodes[4], conns: map[string]*grpc.ClientConn{}}

	for _, n := range c.Nodes {
		m.conns[n.Name] = a.conn(t, n.Address)
	}

	for _, n := range []localcluster.Node{m.newCP, m.newWorker} {
		upgradeNode(t, a, cli, n, bundle, b.newVersion)
	}

	ph.end("one control plane and one worker upgraded")

	t.Run("routing", m.checkRouting)
	t.Run("renewals", m.checkRenewals)
	t.Run("heartbeats", m.checkHeartbeats)
	t.Run("joins", m.checkJoins)
	t.Run("revocation", m.checkRevocation)
	ph.end("flows checked in the mixed cluster")

	finishUpgrade(t, m, bundle)
	ph.end("the rest upgraded with aegisctl upgrade")

	got := eventuallyTokenUses(t, a, cps[1])
	for id, uses := range tokensBefore {
		if now, ok := got[id]; !ok || now != uses {
			t.Errorf("token %s after the upgrade: %d uses (listed %v), want %d: etcd lost data written by %s",
				id, now, ok, uses, b.oldVersion)
		}
	}

	eventually(t, "three voting members after the upgrade", func() error {
		return votersAre(etcdCtx(t), cli, cps[0].Address, cps[0].Name, cps[1].Name, cps[2].Name)
	})
}

// upgradeNode uploads bundle to n and upgrades n to it over the API, as
// the Talos client does, then waits for n to run version v with every
// service up.
func upgradeNode(t *testing.T, a admin, cli *client.Client, n localcluster.Node, bundle, v string) {
	t.Helper()

	ref := uploadBundle(t, a.conn(t, n.Address), bundle)
	start := time.Now()

	if _, err := cli.UpgradeWithOptions(client.WithNode(etcdCtx(t), n.Address), client.WithUpgradeImage(ref)); err != nil {
		t.Fatalf("upgrading %s to %s: %v", n.Name, v, err)
	}

	waitVersion(t, cli, n.Address, v)
	t.Logf("%s on %s and all services up %s after the Upgrade call", n.Name, v, time.Since(start).Round(time.Millisecond))
}

// finishUpgrade takes every node still on the previous release to the
// current build with `aegisctl upgrade` (the current build's), as an
// operator would, and checks every node on it.
func finishUpgrade(t *testing.T, m skewMixed, bundle string) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	out, err := exec.CommandContext(ctx, filepath.Join(m.b.newBin, "aegisctl"), "--aegisconfig", m.c.ClientConfigPath(),
		"upgrade", "--bundle", bundle, "--dry-run=false", "--node-timeout", "2m").CombinedOutput()
	if err != nil {
		t.Fatalf("aegisctl upgrade of the nodes left on %s: %v\n%s", m.b.oldVersion, err, out)
	}

	t.Logf("aegisctl upgrade:\n%s", out)

	for _, n := range m.c.Nodes {
		waitVersion(t, m.cli, n.Address, m.b.newVersion)
	}
}
