package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/rollout/upgrade"
	"github.com/aegis-os/aegis/rollout/upgrade/upgradetest"
)

// TestUpgradeFlags: flags that ask for nothing sensible, and a file that
// is no release bundle, are refused before anything is dialed, naming
// what is wrong.
func TestUpgradeFlags(t *testing.T) {
	notBundle := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notBundle, []byte("not a bundle\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		flags  upgradeFlags
		prefix string
	}{
		{upgradeFlags{batch: 1, nodeTimeout: time.Minute}, "--bundle: name"},
		{upgradeFlags{bundle: "b", batch: 0, nodeTimeout: time.Minute}, "--batch 0"},
		{upgradeFlags{bundle: "b", batch: 1}, "--node-timeout 0s"},
		{upgradeFlags{bundle: "/nonexistent/aegis.bundle", batch: 1, nodeTimeout: time.Minute}, "--bundle: open /nonexistent/aegis.bundle"},
		{upgradeFlags{bundle: notBundle, batch: 1, nodeTimeout: time.Minute}, "--bundle: " + notBundle + ": "},
	} {
		if err := checkUpgradeFlags(tt.flags); err == nil || !strings.HasPrefix(err.Error(), tt.prefix) {
			t.Errorf("%+v: %v, want an error starting %q", tt.flags, err, tt.prefix)
		}
	}
}

// TestUpgradeNoBundle: the command refuses a bundle it cannot read before
// it reads the client config or dials anything.
func TestUpgradeNoBundle(t *testing.T) {
	_, _, err := runCLI(t, testutil.Epoch, "--aegisconfig", "/nonexistent/config", "upgrade", "--bundle", "/nonexistent/aegis.bundle")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/nonexistent/aegis.bundle") {
		t.Fatalf("upgrade with a bundle that is not there: %v", err)
	}
}

// upgradeOptions are the options of an upgrade of c to v0.3.0, printing to
// out on clk.
func upgradeOptions(c *upgradetest.Cluster, clk clock.Clock, out *bytes.Buffer, dryRun bool) upgrade.Options {
	return upgrade.Options{
		Options: rollout.Options{Out: out, Clock: clk, DryRun: dryRun},
		Cluster: c, Bundle: "aegis-v0.3.0.tar.gz", Batch: 2,
		BundleVersion: func(string) (string, error) { return "v0.3.0", nil },
	}
}

// TestUpgradeDryRun: the plan shows each member with its batch, its
// version and the target, those on the target skipped; nothing changes.
func TestUpgradeDryRun(t *testing.T) {
	c := upgradetest.New(2, 3, "v0.2.0", "v0.3.0")
	c.Versions["w-2"] = "v0.3.0"

	var out bytes.Buffer

	clk := clock.NewFake(testutil.Epoch)
	if err := runUpgrade(t.Context(), &env{stdout: &out, clock: clk}, upgradeOptions(c, clk, &out, true)); err != nil {
		t.Fatal(err)
	}

	want := `Release bundle aegis-v0.3.0.tar.gz: Aegis v0.3.0
Plan: 4 of 5 members to upgrade, control planes one at a time, then workers 2 at a time, each batch healthy on v0.3.0 before the next.

BATCH  HOSTNAME  ADDRESS   ROLE          FROM    TO
1      cp-1      10.0.0.2  controlplane  v0.2.0  v0.3.0
2      cp-2      10.0.0.3  controlplane  v0.2.0  v0.3.0
3      w-1       10.0.1.2  worker        v0.2.0  v0.3.0
-      w-2       10.0.1.3  worker        v0.3.0  (on it already: skipped)
3      w-3       10.0.1.4  worker        v0.2.0  v0.3.0

Dry run: nothing changed. Run again with --dry-run=false to upgrade.
`
	if out.String() != want {
		t.Fatalf("dry run:\n%s\nwant:\n%s", out.String(), want)
	}

	if got := c.Changes(); len(got) > 0 {
		t.Fatalf("a dry run changed %v", got)
	}
}

// TestUpgradeRun: the plan, then progress as it goes; a member that fails
// makes the command fail, naming it.
func TestUpgradeRun(t *testing.T) {
	c := upgradetest.New(1, 2, "v0.2.0", "v0.3.0")
	c.FailDeliver["w-2"] = errors.New("disk full")

	var out bytes.Buffer

	clk := clock.NewFake(testutil.Epoch)
	stop := advanceOnWait(clk, time.Second)

	err := runUpgrade(t.Context(), &env{stdout: &out, clock: clk}, upgradeOptions(c, clk, &out, false))

	stop()

	if err == nil || !strings.HasPrefix(err.Error(), "upgrade stopped at w-2 (10.0.1.3), delivering the bundle to it: disk full") {
		t.Fatalf("%v\n%s", err, out.String())
	}

	for _, line := range []string{"BATCH  HOSTNAME", "Batch 1 of 2: cp-1 (10.0.0.2)\n", "cp-1 (10.0.0.2): runs v0.3.0 and is healthy, 2s in all"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}
