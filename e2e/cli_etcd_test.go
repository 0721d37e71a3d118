package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/etcdsnap"
)

// cliEtcd drives the etcd commands of aegisctl: members and status with
// -n (the workers' rows are errors of their own), a snapshot saved and
// described, and the refusals a user meets.
func cliEtcd(t *testing.T, c *cliCluster) {
	cp, w1 := c.Nodes[0].Address, c.Nodes[1].Address

	out := c.ok(t, c.admin(), "-n", cp, "etcd", "members")
	if rows := tableRows(out); len(rows) != 1 || rows[0][2] != "cli-controlplane-1" || rows[0][5] != "false" {
		t.Fatalf("etcd members:\n%s", out)
	}

	res := c.ctl(t, c.admin(), "-n", cp+","+w1, "etcd", "status")
	if res.code == 0 || !strings.Contains(res.stdout, w1+"   error: failed precondition") || !strings.Contains(res.stderr, "1 of 2 nodes failed") {
		t.Fatalf("etcd status with a worker: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	file := filepath.Join(c.dir, "etcd.snapshot")

	out = c.ok(t, c.admin(), "-n", cp, "etcd", "snapshot", file)
	if !regexp.MustCompile(`^snapshot saved to ` + regexp.QuoteMeta(file) + `: \d+ bytes, revision \d+\n$`).MatchString(out) {
		t.Fatalf("etcd snapshot: %q", out)
	}

	if _, err := etcdsnap.Check(file); err != nil {
		t.Fatalf("the saved snapshot: %v", err)
	}

	if entries, _ := os.ReadDir(c.dir); slicesContainPart(entries) {
		t.Fatalf("a temporary file was left beside the snapshot: %v", entries)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", cp, "bootstrap"}, "already bootstrapped"},
		{[]string{"-n", w1, "bootstrap"}, "control planes only"},
		{[]string{"-n", cp, "etcd", "remove-member", "1234"}, "not found"},
		{[]string{"-n", cp, "etcd", "remove-member", "not-hex"}, "not a hexadecimal etcd member ID"},
		{[]string{"-n", cp, "bootstrap", "--recover-from", filepath.Join(c.dir, "missing")}, "no such file"},
	} {
		// A node's failure is a row of the table; the command's own, stderr.
		if res := c.ctl(t, c.admin(), tc.args...); res.code == 0 || !strings.Contains(res.stdout+res.stderr, tc.want) {
			t.Errorf("aegisctl %s: exit %d, want an error saying %q\n%s%s", strings.Join(tc.args, " "), res.code, tc.want, res.stdout, res.stderr)
		}
	}
}

func slicesContainPart(entries []os.DirEntry) bool {
	for _, e := range entries {
		if strings.Contains(e.Name(), ".part") {
			return true
		}
	}

	return false
}
