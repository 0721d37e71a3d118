package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// netnsPrefixEnv names the prefix of every network namespace and link the
// netns tests make (default defaultNetnsPrefix). The tests share it and so
// run one after another, never in parallel.
const (
	netnsPrefixEnv     = "AEGIS_E2E_NETNS_PREFIX"
	defaultNetnsPrefix = "aegis-e2e"
)

// needNetns skips a test that cannot make network namespaces (not root, or
// no ip), removes what an earlier run that was killed left under the
// prefix, and checks when the test ends, whatever happened, that nothing of
// the prefix is left (removing it if so). It returns the prefix.
func needNetns(t *testing.T) string {
	t.Helper()
	needBinaries(t)

	if os.Geteuid() != 0 {
		t.Skip("netns test: making network namespaces, veth pairs and a bridge needs root; run the e2e tests as root")
	}

	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns test: iproute2's ip command is missing (apt-get install iproute2)")
	}

	prefix := os.Getenv(netnsPrefixEnv)
	if prefix == "" {
		prefix = defaultNetnsPrefix
	}

	if err := localcluster.CheckNetnsPrefix(prefix); err != nil {
		t.Fatalf("%s: %v", netnsPrefixEnv, err)
	}

	if err := localcluster.RemoveLeftovers(prefix); err != nil {
		t.Fatalf("removing the leftovers of an earlier run: %v", err)
	}

	t.Cleanup(func() {
		left, err := localcluster.Leftovers(prefix)
		if err == nil && len(left) > 0 {
			t.Errorf("left behind: %s", strings.Join(left, ", "))
		}

		_ = localcluster.RemoveLeftovers(prefix)
	})

	return prefix
}

// netnsCluster creates a cluster with every node in its own network
// namespace on cidr, destroyed when the test ends.
func netnsCluster(t *testing.T, name, cidr string, controlPlanes, workers int) *localcluster.Cluster {
	t.Helper()

	prefix := needNetns(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: name, ControlPlanes: controlPlanes, Workers: workers, CIDR: netip.MustParsePrefix(cidr),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: etcdTimeout,
		Network: localcluster.NetworkNetns, NetnsPrefix: prefix,
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

		_ = c.Heal()

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return c
}

// bridgeSources gives the bridge of c's network n more addresses, .from
// to .from+n-1 of its subnet, for joiners that need sources of their own
// (trustd rate-limits failures per source, and signs only for the
// caller's address). They go with the bridge.
func bridgeSources(t *testing.T, c *localcluster.Cluster, from, n int) func(int) string {
	t.Helper()

	base := c.Net.Gateway.Masked().Addr().As4()
	addr := func(i int) string { return fmt.Sprintf("%d.%d.%d.%d", base[0], base[1], base[2], from+i) }

	var batch strings.Builder
	for i := range n {
		fmt.Fprintf(&batch, "addr add %s/32 dev %s\n", addr(i), c.Net.Bridge)
	}

	cmd := exec.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())

	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("adding source addresses: %v\n%s", err, out)
	}

	return addr
}
