package e2e

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// cliMessagesCIDR holds the one node of TestCLIMessages.
const cliMessagesCIDR = "127.6.2.0/28"

// TestCLIMessages: what aegisctl says when it is pointed at the wrong port
// or at a node of another cluster, and the version and log level of the
// daemons, against real processes.
func TestCLIMessages(t *testing.T) {
	needBinaries(t)

	lc, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "msgs", ControlPlanes: 1, CIDR: netip.MustParsePrefix(cliMessagesCIDR),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: waitTimeout,
		Runtime: certs.RuntimeProcess, // not about containers: the quicker runtime
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if err := lc.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	c := &cliCluster{Cluster: lc, home: t.TempDir(), dir: t.TempDir()}
	cp := lc.Nodes[0].Address

	t.Run("trustd's port as the endpoint", func(t *testing.T) {
		res := c.ctl(t, c.admin(), "-e", cp+":50001", "hostname")
		want := "error: endpoint " + cp + ":50001 is trustd's port, which serves no node commands: use " + cp + " (apid, port 50000)\n"

		if res.code != 1 || res.stderr != want {
			t.Fatalf("exit %d, stderr %q; want %q", res.code, res.stderr, want)
		}
	})

	t.Run("a node of another cluster: x509's hint in full", func(t *testing.T) {
		other := filepath.Join(c.dir, "other")
		c.ok(t, c.admin(), "gen", "config", "other", cp, "-o", other)

		res := c.ctl(t, filepath.Join(other, "aegisconfig"), "hostname")
		want := `x509: certificate signed by unknown authority (possibly because of "x509: Ed25519 verification failure" ` +
			`while trying to verify candidate authority certificate "aegis OS CA")` + "\n"

		if res.code != 1 || !strings.HasPrefix(res.stderr, "error: cannot reach endpoint "+cp+": ") || !strings.HasSuffix(res.stderr, want) {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
	})

	t.Run("--version of every binary", func(t *testing.T) {
		for _, bin := range []string{"aegisctl", "machined", "apid", "trustd"} {
			out, err := exec.Command(filepath.Join(binDir, bin), "--version").Output()
			if err != nil || !strings.HasPrefix(string(out), bin+" v") {
				t.Errorf("%s --version: %v %q", bin, err, out)
			}
		}
	})

	t.Run("apid and trustd run at machined's log level", func(t *testing.T) {
		state := lc.StatePath(lc.Nodes[0])

		for _, bin := range []string{"apid", "trustd"} {
			pids := pidsOf(filepath.Join(binDir, bin), state)
			if len(pids) != 1 {
				t.Fatalf("%d %s processes of the node", len(pids), bin)
			}

			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "cmdline"))
			if err != nil || !bytes.Contains(cmdline, []byte("\x00--log-level\x00info\x00")) {
				t.Errorf("%s command line %q lacks --log-level info", bin, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			}
		}
	})
}
