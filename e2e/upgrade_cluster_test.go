package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// upgradeClusterTTL is the node certificates' lifetime in the rolling
// upgrade: the least trustd signs, so that the workers renew (at half
// life) while the control planes go one by one.
const upgradeClusterTTL = time.Minute

// upgradeClusterTimeout bounds the whole rolling upgrade of five nodes.
const upgradeClusterTimeout = 5 * time.Minute

// upgradeMaxOutage bounds how long one call may wait while its node
// switches version: machined holds apid's socket across the exec, so a
// new connection waits in its backlog until the new apid accepts it,
// about 0.1 s later (nothing in flight holds the old apid's stop: token
// calls stop waiting for trustd, follows end after apid.StreamStopGrace);
// the callers' own deadline is 5 s.
const upgradeMaxOutage = 4 * time.Second

// TestUpgradeCluster upgrades three control planes and two workers built
// as upgradeOldTag to this build with `aegisctl upgrade`, as an operator
// would, while a client calls Version on every node's own apid and the
// workers renew their certificates: a control plane whose going would
// cost etcd its quorum is refused first, naming the member that is down;
// then every node ends on the new version with the cluster's etcd data
// intact, no call fails (the nodes run the process runtime, whose apid
// socket outlives the switch: a call waits for the new apid), and the
// workers renew through the upgraded control planes. The figures (per
// node outage, the longest call, total time, failed calls) are logged.
func TestUpgradeCluster(t *testing.T) {
	needImages(t)
	t.Parallel()

	old := oldBuild(t)

	c := upgradeCluster(t, localcluster.Options{
		Name: "upcluster", ControlPlanes: 3, Workers: 2, CIDR: netip.MustParsePrefix("127.9.62.0/24"),
		BinDir: old, UpgradeTrial: time.Minute, NodeCertTTL: upgradeClusterTTL,
	})

	cps := c.ControlPlanes()
	cli := talosClient(t, c.ClientConfigPath())
	a := clusterAdmin(t, c)
	bundle := writeBundle(t, binDir, version.Dev)

	t.Run("a control plane whose going would cost etcd its quorum is refused", func(t *testing.T) {
		checkQuorumRefusal(t, c, cli, a, bundle)
	})

	tok := createClusterToken(t, a, cps[0], 7)
	tokensBefore := eventuallyTokenUses(t, a, cps[0])
	worker := c.Nodes[len(c.Nodes)-1]

	firstCert, err := a.servedCertificate(worker.Address)
	if err != nil {
		t.Fatal(err)
	}

	calls := startVersionCalls(t, c)
	writes := startTokenWrites(t, a, cps)
	start := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), upgradeClusterTimeout)
	defer cancel()

	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "aegisctl"), "--aegisconfig", c.ClientConfigPath(),
		"upgrade", "--bundle", bundle, "--dry-run=false", "--node-timeout", "2m").CombinedOutput()
	if err != nil {
		t.Fatalf("aegisctl upgrade: %v\n%s", err, out)
	}

	took := time.Since(start)
	t.Logf("aegisctl upgrade of 3 control planes and 2 workers: %s\n%s", took.Round(time.Millisecond), out)

	for _, n := range c.Nodes {
		waitVersion(t, cli, n.Address, version.Dev)
	}

	// Calls go on after the last node is back, so that each node's last
	// outage is closed by an answer.
	time.Sleep(time.Second)
	calls.stop()
	writes.stop()
	calls.check(t, took)

	eventually(t, "a worker certificate renewed through the upgraded control planes", func() error {
		cert, err := a.servedCertificate(worker.Address)
		if err == nil && !cert.NotBefore.After(firstCert.NotBefore) {
			err = fmt.Errorf("still the certificate from %s", firstCert.NotBefore.Format(time.TimeOnly))
		}

		if err == nil {
			t.Logf("%s renewed: a certificate from %s, %s after the upgrade began", worker.Name,
				cert.NotBefore.Format(time.TimeOnly), cert.NotBefore.Sub(start).Round(time.Second))
		}

		return err
	})

	id, _, _ := strings.Cut(tok, ".")
	got := eventuallyTokenUses(t, a, cps[2])

	for before, uses := range tokensBefore {
		if now, ok := got[before]; !ok || now != uses {
			t.Errorf("token %s after the upgrade: %d uses (listed %v), want %d", before, now, ok, uses)
		}
	}

	if got[id] != 0 {
		t.Errorf("the cluster token was used %d times during the upgrade", got[id])
	}

	writes.check(t, got)

	eventually(t, "three voting members after the upgrade", func() error {
		return votersAre(etcdCtx(t), cli, cps[0].Address, cps[0].Name, cps[1].Name, cps[2].Name)
	})
}

// checkQuorumRefusal stops the third control plane and asks the first to
// upgrade: it refuses, naming the member that is down, and records nothing.
// The stopped one is started again.
func checkQuorumRefusal(t *testing.T, c *localcluster.Cluster, cli *client.Client, a admin, bundle string) {
	cps := c.ControlPlanes()
	ref := uploadBundle(t, a.conn(t, cps[0].Address), bundle)

	if err := c.StopNode(cps[2].Name); err != nil {
		t.Fatal(err)
	}

	var err error

	eventually(t, "the upgrade refused while a member is down", func() error {
		_, err = cli.UpgradeWithOptions(client.WithNode(etcdCtx(t), cps[0].Address), client.WithUpgradeImage(ref))
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "etcd would lose quorum") ||
			!strings.Contains(err.Error(), cps[2].Name) {
			return fmt.Errorf("%v, want FailedPrecondition saying etcd would lose quorum, naming %s", err, cps[2].Name)
		}

		return nil
	})

	t.Logf("refused: %v", err)

	if _, ok, _ := (upgrade.Store{Dir: layout.Layout{State: c.StatePath(cps[0])}.UpgradeDir()}).Load(); ok {
		t.Fatal("the refused upgrade recorded slots")
	}

	if _, err := c.StartNode(etcdCtx(t), cps[2].Name, etcdTimeout); err != nil {
		t.Fatal(err)
	}

	eventually(t, "three voting members again", func() error {
		return votersAre(etcdCtx(t), cli, cps[0].Address, cps[0].Name, cps[1].Name, cps[2].Name)
	})

	// The upgrade checks every control plane healthy before one goes:
	// the restarted one's etcd passes its health check a moment after it
	// votes.
	for _, n := range c.Nodes {
		waitVersion(t, cli, n.Address, upgradeOldTag)
	}
}

// versionCalls calls Version on every node's own apid, one caller per
// node, recording each call's outcome.
type versionCalls struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	nodes  []string
	log    map[string][]callOutcome
}

// callOutcome is one Version call: when it ended, how long it took, and
// its code.
type callOutcome struct {
	at   time.Time
	took time.Duration
	code codes.Code
	err  error
}

// startVersionCalls starts a caller per node of c.
func startVersionCalls(t *testing.T, c *localcluster.Cluster) *versionCalls {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	v := &versionCalls{cancel: cancel, log: map[string][]callOutcome{}}
	t.Cleanup(v.stop)

	for _, n := range c.Nodes {
		cli, err := c.NodeClient(ctx, n)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { cli.Close() }) //nolint:errcheck // test teardown

		v.nodes = append(v.nodes, n.Name)
		v.wg.Go(func() { v.call(ctx, cli, n.Name) })
	}

	return v
}

// call calls Version on cli every 100 ms until ctx ends.
func (v *versionCalls) call(ctx context.Context, cli *client.Client, name string) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		began := time.Now()
		_, err := cli.Version(cctx)
		cancel()

		if ctx.Err() != nil {
			return
		}

		v.mu.Lock()
		v.log[name] = append(v.log[name], callOutcome{at: time.Now(), took: time.Since(began), code: status.Code(err), err: err})
		v.mu.Unlock()

		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the calls and waits for the callers.
func (v *versionCalls) stop() {
	v.cancel()
	v.wg.Wait()
}

// check logs, per node, the calls, the failed ones and the outage (the
// longest call, or run of failed calls, while it switched), and fails the
// test for any failed call, an outage over upgradeMaxOutage, a node that
// ended down or one that never answered.
func (v *versionCalls) check(t *testing.T, took time.Duration) {
	t.Helper()

	var (
		total, failed int
		longest       time.Duration
	)

	for _, name := range v.nodes {
		log := v.log[name]
		outage, down, fails := outageOf(log)
		total += len(log)
		failed += fails
		longest = max(longest, outage)

		t.Logf("%s: %d calls, %d failed while it switched, outage %s", name, len(log), fails, outage.Round(time.Millisecond))

		for _, o := range log {
			if o.code != codes.OK {
				t.Errorf("%s: a call failed after %s with %v, want none: the socket outlives the switch", name, o.took.Round(time.Millisecond), o.err)
			}
		}

		switch {
		case down:
			t.Errorf("%s: its last call failed: the node is down after the upgrade", name)
		case outage > upgradeMaxOutage:
			t.Errorf("%s: down for %s, want at most %s", name, outage, upgradeMaxOutage)
		case len(log) == 0 || !slices.ContainsFunc(log, func(o callOutcome) bool { return o.code == codes.OK }):
			t.Errorf("%s: no call answered", name)
		}
	}

	t.Logf("upgrade figures: %s in all, %d Version calls, %d failed (%.1f %%), longest outage %s",
		took.Round(time.Millisecond), total, failed, 100*float64(failed)/float64(max(total, 1)), longest.Round(time.Millisecond))
}

// outageOf is a node's outage: the longest of its calls, or of the times
// from its first failed call after an answer to its next answer; whether
// its last call failed, and how many failed.
func outageOf(log []callOutcome) (longest time.Duration, down bool, failed int) {
	var since time.Time

	for i, o := range log {
		if o.code == codes.OK {
			longest = max(longest, o.took)

			if !since.IsZero() {
				longest = max(longest, o.at.Sub(since))
				since = time.Time{}
			}

			continue
		}

		failed++

		if since.IsZero() && i > 0 {
			since = log[i-1].at
		}
	}

	return longest, !since.IsZero(), failed
}
