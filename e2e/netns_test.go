package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// TestClusterNetns drives aegisctl cluster create --network netns: the
// nodes run in namespaces of their own and answer over the bridge;
// destroy, a create that fails halfway and a create refused for leftovers
// leave no namespace or link of the prefix behind.
func TestClusterNetns(t *testing.T) {
	prefix := needNetns(t)
	dir := testutil.ShortTempDir(t)
	state := filepath.Join(dir, "clusters")
	create := []string{"cluster", "create", "--name", "nsc", "--network", "netns", "--netns-prefix", prefix,
		"--cidr", "10.213.3.0/24", "--state-dir", state, "--bin-dir", binDir, "--controlplanes", "1", "--workers", "1",
		"--runtime", "process"} // the networks are under test here, not the containers

	t.Cleanup(func() {
		if c, err := localcluster.Load(state, "nsc"); err == nil {
			_ = c.Destroy()
		}
	})

	t.Run("create, reach, destroy", func(t *testing.T) {
		if out, err := aegisctl(t, dir, create...); err != nil {
			t.Fatalf("cluster create: %v\n%s", err, out)
		}

		out, err := aegisctl(t, dir, "-n", "10.213.3.2,10.213.3.3", "hostname")
		if err != nil || !strings.Contains(out, "nsc-controlplane-1") || !strings.Contains(out, "nsc-worker-1") {
			t.Fatalf("hostname over the bridge: %v\n%s", err, out)
		}

		// The node's address is in its namespace, not here: here is the bridge's .1.
		if got := ipOut(t, "-n", prefix+"-worker-1", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(got, "10.213.3.3/24") {
			t.Errorf("worker's eth0: %s", got)
		}

		if got := ipOut(t, "-o", "addr", "show", "to", "10.213.3.0/24"); !strings.Contains(got, prefix+"-br") || strings.Contains(got, "10.213.3.2") {
			t.Errorf("addresses here: %s", got)
		}

		if out, err = aegisctl(t, dir, "cluster", "destroy", "--name", "nsc", "--state-dir", state); err != nil {
			t.Fatalf("cluster destroy: %v\n%s", err, out)
		}

		noLeftovers(t, prefix, state)
	})

	t.Run("a create that fails halfway leaves nothing", func(t *testing.T) {
		out, err := aegisctl(t, dir, append(create, "--wait-timeout", "1ms")...)
		if err == nil || !strings.Contains(out, "not up after") {
			t.Fatalf("cluster create with no time to come up: %v\n%s", err, out)
		}

		noLeftovers(t, prefix, state)
	})

	t.Run("leftovers of the prefix are refused, untouched", func(t *testing.T) {
		ipOut(t, "netns", "add", prefix+"-controlplane-1")

		out, err := aegisctl(t, dir, create...)
		if err == nil || !strings.Contains(out, "netns "+prefix+"-controlplane-1") {
			t.Fatalf("cluster create over a leftover namespace: %v\n%s", err, out)
		}

		if left, _ := localcluster.Leftovers(prefix); len(left) != 1 {
			t.Fatalf("after a refused create: %v, want the leftover namespace alone", left)
		}

		ipOut(t, "netns", "del", prefix+"-controlplane-1")
		noLeftovers(t, prefix, state)
	})
}

// noLeftovers checks that no namespace or link of prefix and no cluster
// folder is left.
func noLeftovers(t *testing.T, prefix, state string) {
	t.Helper()

	if left, err := localcluster.Leftovers(prefix); err != nil || len(left) > 0 {
		t.Errorf("left behind: %v %v", left, err)
	}

	if _, err := os.Stat(filepath.Join(state, "nsc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster folder left behind: %v", err)
	}
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()

	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	return string(out)
}

// TestTokensPartitioned runs three control planes and a worker, each in
// its own network namespace: a single-use token raced over real links; one control
// plane cut from the other two, where the majority keeps issuing with
// stored tokens while the minority refuses them with Unavailable (the
// static token still works there); the partition healed, every control
// plane agrees on every token and use count; and after a restart of the
// whole cluster every token and use count is still there.
func TestTokensPartitioned(t *testing.T) {
	t.Parallel()

	c := netnsCluster(t, "part", "10.213.1.0/24", 3, 1)
	a := clusterAdmin(t, c)
	cps := c.ControlPlanes()
	source := bridgeSources(t, c, 100, tokenJoiners+20)

	t.Run("single-use token raced over real links", func(t *testing.T) {
		checkSingleUseRace(t, a, cps, source)
	})

	t.Run("partition and heal", func(t *testing.T) {
		checkPartition(t, c, a, cps, func(i int) string { return source(tokenJoiners + i) })
	})

	t.Run("restart of the whole cluster", func(t *testing.T) { checkClusterRestart(t, c, a, cps) })
}

func checkPartition(t *testing.T, c *localcluster.Cluster, a admin, cps []localcluster.Node, source func(int) string) {
	limited := createClusterToken(t, a, cps[0], 50)

	for i, cp := range cps {
		if _, err := joinAt(t, a, cp, source(i), limited); err != nil {
			t.Fatalf("join through %s before the partition: %v", cp.Name, err)
		}
	}

	mc, err := certs.LoadMachineConfig(c.ConfigPath(cps[2]), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	static := mc.TrustdToken().Reveal()

	if err = c.Partition(cps[2].Name); err != nil {
		t.Fatal(err)
	}

	// Healed whatever happens, so that a failure here leaves the next
	// subtest a whole cluster.
	t.Cleanup(func() {
		if err := c.Heal(); err != nil {
			t.Errorf("healing the partition: %v", err)
		}
	})

	cut := time.Now()

	for i, cp := range cps[:2] {
		eventually(t, "the majority issues through "+cp.Name, func() error {
			_, err := joinAt(t, a, cp, source(3+i), limited)

			return err
		})
	}

	t.Logf("majority issuing %s after the cut", time.Since(cut).Round(time.Millisecond))

	var made string

	eventually(t, "a token made on the majority", func() error {
		resp, err := tokens.NewTokenServiceClient(a.conn(t, cps[1].Address)).Create(etcdCtx(t), &tokens.CreateRequest{Description: "made while partitioned"})
		if err == nil {
			made = resp.GetMessages()[0].GetToken()
		}

		return err
	})

	for i, tok := range []string{limited, made} {
		eventually(t, "the minority refuses a stored token with Unavailable", func() error {
			_, err := joinAt(t, a, cps[2], source(5+i), tok)
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "without quorum") {
				return fmt.Errorf("%v, want Unavailable saying etcd has no quorum", err)
			}

			return nil
		})
	}

	t.Logf("minority refusing stored tokens %s after the cut", time.Since(cut).Round(time.Millisecond))

	if _, err = joinAt(t, a, cps[2], source(7), static); err != nil {
		t.Fatalf("the static token on the minority: %v", err)
	}

	// For up to the etcd client's keepalive bound after the cut, a share
	// of the majority's reads still goes to the cut member and times out
	// (Unavailable, which clients retry).
	before := eventuallyTokenUses(t, a, cps[0])

	if err = c.Heal(); err != nil {
		t.Fatal(err)
	}

	healed := time.Now()

	eventually(t, "the healed control plane issues for the token made while it was cut", func() error {
		_, err := joinAt(t, a, cps[2], source(8), made)

		return err
	})

	t.Logf("healed control plane issuing %s after the heal", time.Since(healed).Round(time.Millisecond))

	// A use whose reply was lost while the majority elected a leader
	// counts without a certificate (fail closed): at least, never fewer.
	id := func(tok string) string { i, _, _ := strings.Cut(tok, "."); return i }
	if before[id(limited)] < 5 {
		t.Errorf("limited token counted %d uses, want at least 5 (3 before the cut, 2 on the majority)", before[id(limited)])
	}

	before[id(made)]++
	sameUsesEverywhere(t, a, cps, before)
}

// tokenUses lists the stored tokens through cp: id → uses.
func tokenUses(t *testing.T, a admin, cp localcluster.Node) (map[string]uint32, error) {
	t.Helper()

	resp, err := tokens.NewTokenServiceClient(a.conn(t, cp.Address)).List(etcdCtx(t), &tokens.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the tokens through %s: %w", cp.Name, err)
	}

	out := map[string]uint32{}
	for _, tok := range resp.GetMessages()[0].GetTokens() {
		out[tok.GetId()] = tok.GetUses()
	}

	return out, nil
}

// eventuallyTokenUses is tokenUses, retried while cp's store is unavailable.
func eventuallyTokenUses(t *testing.T, a admin, cp localcluster.Node) map[string]uint32 {
	t.Helper()

	var out map[string]uint32

	eventually(t, "the tokens as "+cp.Name+" lists them", func() (err error) {
		out, err = tokenUses(t, a, cp)

		return err
	})

	return out
}

// sameUsesEverywhere checks that every control plane lists exactly want.
func sameUsesEverywhere(t *testing.T, a admin, cps []localcluster.Node, want map[string]uint32) {
	t.Helper()

	for _, cp := range cps {
		eventually(t, "the tokens as "+cp.Name+" lists them", func() error {
			got, err := tokenUses(t, a, cp)
			if err != nil {
				return err
			}

			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%v, want %v", got, want)
			}

			return nil
		})
	}
}

func checkClusterRestart(t *testing.T, c *localcluster.Cluster, a admin, cps []localcluster.Node) {
	before := eventuallyTokenUses(t, a, cps[0])
	if len(before) < 3 {
		t.Fatalf("%d tokens before the restart, want the earlier subtests' 3", len(before))
	}

	start := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()

	if err := c.Restart(ctx, etcdTimeout); err != nil {
		t.Fatal(err)
	}

	t.Logf("whole cluster restarted in %s", time.Since(start).Round(time.Millisecond))

	sameUsesEverywhere(t, a, cps, before)
}
