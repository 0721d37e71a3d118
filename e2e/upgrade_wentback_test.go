package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// crashLoop begins the reason a node gives for leaving a version whose
// apid cannot start.
const crashLoop = "v0.1.1: service apid exited 3 times in a row"

// wentBackNodeTimeout is aegisctl upgrade's --node-timeout while a node
// goes back: the upgrade must stop long before it.
const wentBackNodeTimeout = 2 * time.Minute

// checkWentBack upgrades cp with `aegisctl upgrade` to a build stamped
// v0.1.1 whose apid cannot start. The node goes back by itself, and
// aegisctl stops as soon as the node reports it, long before its node
// timeout, naming the member, the version it went back to and the node's
// reason; a reader sees the same in the node's UpgradeStatus, through the
// API and with `aegisctl get upgrade`.
func checkWentBack(t *testing.T, c *localcluster.Cluster, reader *client.Client, cp localcluster.Node) {
	t.Helper()

	bundle := writeBundle(t, brokenBin(t), "v0.1.1")
	start := time.Now()

	out, err := runAegisctl(t, c, wentBackNodeTimeout+time.Minute,
		"upgrade", "--bundle", bundle, "--dry-run=false", "--node-timeout", wentBackNodeTimeout.String())
	took := time.Since(start)

	if err == nil {
		t.Fatalf("aegisctl upgrade to a version whose apid cannot start succeeded:\n%s", out)
	}

	for _, want := range []string{
		fmt.Sprintf("(%s), waiting for it: it went back to %s by itself at ", cp.Address, version.Dev),
		crashLoop, "upgraded to v0.1.1: none", "not touched: none", "get upgrade' shows its versions and the rollback",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("aegisctl upgrade's output lacks %q:\n%s", want, out)
		}
	}

	if took >= wentBackNodeTimeout {
		t.Fatalf("aegisctl upgrade stopped after %s: it waited out --node-timeout %s", took, wentBackNodeTimeout)
	}

	t.Logf("aegisctl upgrade stopped %s after it began, the node back on %s:\n%s", took.Round(time.Millisecond), version.Dev, out)

	st := upgradeStatus(t, reader, cp.Address)
	if r := st.LastRollback; st.ActiveVersion != version.Dev || st.PreviousVersion != "" || st.OnTrial || !r.ByNode ||
		r.From != "v0.1.1" || r.To != version.Dev || !strings.Contains(r.Reason, crashLoop) || r.At.Before(start) || r.At.After(time.Now()) {
		t.Fatalf("upgrade status after the node went back: %+v", st)
	}

	out, err = runAegisctl(t, c, time.Minute, "-n", cp.Address, "get", "upgrade")
	if err != nil || !strings.Contains(out, crashLoop) {
		t.Fatalf("aegisctl get upgrade (%v):\n%s", err, out)
	}

	t.Logf("aegisctl get upgrade:\n%s", out)
}

// upgradeStatus reads the UpgradeStatus of node through c.
func upgradeStatus(t *testing.T, c *client.Client, node string) resourcetypes.UpgradeStatusSpec {
	t.Helper()

	st, err := safe.StateGet[*resourcetypes.UpgradeStatus](client.WithNode(etcdCtx(t), node), c.COSI, resourcetypes.NewUpgradeStatus().Metadata())
	if err != nil {
		t.Fatalf("reading the upgrade status of %s: %v", node, err)
	}

	return *st.TypedSpec()
}

// runAegisctl runs aegisctl with c's client config and args, within
// timeout, and returns what it printed (stdout, then stderr).
func runAegisctl(t *testing.T, c *localcluster.Cluster, timeout time.Duration, args ...string) (string, error) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var out bytes.Buffer

	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "aegisctl"), append([]string{"--aegisconfig", c.ClientConfigPath()}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out

	err := cmd.Run()

	return out.String(), err
}
