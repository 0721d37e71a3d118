package e2e

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/renewal"
)

// TestCLI drives a local cluster of real machined processes (one control
// plane, two workers, in 127.6.0.0/28) with the aegisctl binary. The
// subtests share the cluster and run in order: the last ones break nodes.
func TestCLI(t *testing.T) {
	c := startCLICluster(t)

	// Made first, so that the wait for its renewal overlaps the others.
	short := c.configNew(t, "short", "--roles", "os:operator", "--crt-ttl", "30s")

	t.Run("every node answers", func(t *testing.T) { cliEveryNode(t, c) })
	t.Run("reboot, health and events", func(t *testing.T) { cliReboot(t, c) })
	t.Run("roles of configs made with config new", func(t *testing.T) { cliRoles(t, c) })
	t.Run("etcd commands", func(t *testing.T) { cliEtcd(t, c) })
	t.Run("single-use token joins one worker", func(t *testing.T) { cliSingleUseToken(t, c) })
	t.Run("short-lived certificate renews itself", func(t *testing.T) { cliRenewal(t, c, short) })
	t.Run("apid restarted through itself answers", func(t *testing.T) { cliApidRestart(t, c) })
	t.Run("killed apid is restarted", func(t *testing.T) { cliApidKilled(t, c) })
	t.Run("dead node is an error row", func(t *testing.T) { cliDeadNode(t, c) })
}

func cliEveryNode(t *testing.T, c *cliCluster) {
	cp, w1, w2 := c.Nodes[0].Address, c.Nodes[1].Address, c.Nodes[2].Address

	out := c.ok(t, c.admin(), "health", "--control-plane-nodes", cp, "--worker-nodes", w1+","+w2, "--wait-timeout", "1m")
	if !strings.Contains(out, "3 nodes healthy") {
		t.Fatalf("health: %s", out)
	}

	out = c.ok(t, c.admin(), "-n", c.all(), "memory")
	if rows := tableRows(out); len(rows) != 3 || rows[0][0] != cp || rows[1][0] != w1 || rows[2][0] != w2 {
		t.Fatalf("memory on three nodes:\n%s", out)
	}

	if out = c.ok(t, c.admin(), "memory"); !strings.HasPrefix(out, "TOTAL ") || len(tableRows(out)) != 1 {
		t.Fatalf("memory of the endpoint's node:\n%s", out)
	}

	if out = c.ok(t, c.admin(), "-n", w1, "hostname"); !strings.Contains(out, "cli-worker-1") {
		t.Fatalf("hostname: %s", out)
	}

	out = c.ok(t, c.admin(), "-n", cp, "logs", "trustd", "--tail", "2")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], cp+": {") {
		t.Fatalf("logs: %s", out)
	}

	if out = c.ok(t, c.admin(), "-n", w2, "-o", "json", "version"); !strings.Contains(out, `"hostname": "`+w2+`"`) {
		t.Fatalf("version as json: %s", out)
	}
}

func cliReboot(t *testing.T, c *cliCluster) {
	w1 := c.Nodes[1].Address

	out := c.ok(t, c.admin(), "-n", w1, "reboot")

	rows := tableRows(out)
	if len(rows) != 1 || rows[0][0] != w1 || len(rows[0]) != 4 {
		t.Fatalf("reboot: %s", out)
	}

	actor := rows[0][3]

	// The node replies before it reboots, and its API is down while it
	// does: the test waits for the second boot to end before asking again.
	waitUntil(t, "the worker to boot again", func() bool {
		data, _ := os.ReadFile(c.LogPath(c.Nodes[1]))

		return strings.Count(string(data), `"msg":"node ready"`) >= 2
	})

	if out = c.ok(t, c.admin(), "health", "--worker-nodes", w1, "--wait-timeout", "1m"); !strings.Contains(out, "1 node healthy") {
		t.Fatalf("health after the reboot: %s", out)
	}

	// The reboot's boot sequence ended with a boot STOP event of its actor.
	c.stream(t, c.admin(), func(out string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(w1) + `\s+\d+\s+machine\.SequenceEvent\s+` + actor + `\s+boot STOP$`).MatchString(out)
	}, "-n", w1, "events", "--tail", "-1")

	out = c.stream(t, c.admin(), func(out string) bool { return strings.Contains(out, "\n") }, "-n", w1, "logs", "apid", "-f", "--tail", "1")
	if !strings.HasPrefix(out, w1+": {") {
		t.Fatalf("logs -f: %s", out)
	}
}

func cliRoles(t *testing.T, c *cliCluster) {
	reader := c.configNew(t, "reader", "--roles", "os:reader")
	operator := c.configNew(t, "operator", "--roles", "os:operator")

	// apid, certificates, etcd and trustd on the control plane; apid and
	// certificates on each worker.
	if out := c.ok(t, reader, "-n", c.all(), "services"); len(tableRows(out)) != 8 {
		t.Fatalf("a reader lists the services of every node:\n%s", out)
	}

	res := c.ctl(t, reader, "service", "trustd", "restart")
	if res.code == 0 || !strings.Contains(res.stderr,
		"permission denied: /machine.MachineService/ServiceRestart needs one of os:admin, os:operator; caller has os:reader") {
		t.Fatalf("a reader restarting a service: exit %d\n%s", res.code, res.stderr)
	}

	if out := c.ok(t, operator, "service", "trustd", "restart"); !strings.Contains(out, `Service "trustd" restarted`) {
		t.Fatalf("an operator restarting a service: %s", out)
	}

	res = c.ctl(t, operator, "token", "list")
	if res.code == 0 || !strings.Contains(res.stderr, "/aegis.tokens.TokenService/List needs one of os:admin") {
		t.Fatalf("an operator listing tokens: exit %d\n%s", res.code, res.stderr)
	}

	out := c.ok(t, c.admin(), "token", "create", "--ttl", "10m", "--description", "made by an admin")
	id := tokenID(t, out)

	if out = c.ok(t, c.admin(), "token", "revoke", id); !strings.Contains(out, "token "+id+" revoked") {
		t.Fatalf("revoke: %s", out)
	}

	if out = c.ok(t, c.admin(), "token", "list"); !slices.ContainsFunc(tableRows(out), func(r []string) bool {
		return r[0] == id && r[1] == "revoked"
	}) {
		t.Fatalf("list after revoke:\n%s", out)
	}
}

// tokenID reads the token from token create's output, and returns its id.
func tokenID(t *testing.T, out string) string {
	t.Helper()

	tok := tokenOf(t, out)
	id, _, _ := strings.Cut(tok, ".")

	return id
}

func tokenOf(t *testing.T, out string) string {
	t.Helper()

	m := regexp.MustCompile(`(?m)^token:\s+([a-z0-9]{6}\.[a-z0-9]{16})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token in:\n%s", out)
	}

	return m[1]
}

func cliSingleUseToken(t *testing.T, c *cliCluster) {
	tok := tokenOf(t, c.ok(t, c.admin(), "token", "create", "--uses", "1", "--ttl", "10m", "--description", "one extra worker"))
	id, _, _ := strings.Cut(tok, ".")

	first := c.startWorker(t, "extra-1", "127.6.0.20", tok)
	waitUntil(t, "extra-1 to join and be ready", func() bool { return first.logged("node ready") })

	if out := c.ok(t, c.admin(), "-n", "127.6.0.20", "hostname"); !strings.Contains(out, "extra-1") {
		t.Fatalf("the new worker through the control plane: %s", out)
	}

	second := c.startWorker(t, "extra-2", "127.6.0.21", tok)
	waitUntil(t, "extra-2's join to be refused", func() bool {
		return second.logged(join.MsgTokenRefused, `"level":"ERROR"`, "trustd refused the node's token")
	})

	if second.logged("node ready") || second.logged("joined through trustd") {
		t.Fatal("a second node joined with a single-use token")
	}

	second.stop() // its retries would only count against the source address

	audit, err := os.ReadFile(filepath.Join(c.StatePath(c.Nodes[0]), "logs", "trustd.log"))
	if err != nil || !regexp.MustCompile(`"msg":"certificate refused".*"token_id":"`+id+`".*"code":"Unauthenticated"`).Match(audit) {
		t.Fatalf("trustd recorded no refusal of token %s: %v", id, err)
	}

	out := c.ok(t, c.admin(), "token", "list")
	if !slices.ContainsFunc(tableRows(out), func(r []string) bool {
		return r[0] == id && r[1] == "used" && r[2] == "up" && r[3] == "1" && r[5] == "1"
	}) {
		t.Fatalf("token list after one join:\n%s", out)
	}
}

func cliRenewal(t *testing.T, c *cliCluster, short string) {
	old := clientCert(t, short)

	// On a slow day the subtests before this one may have used up most of
	// its life: then a fresh one is made, and waited for.
	if time.Until(old.NotAfter) < 5*time.Second {
		short = c.configNew(t, "short-again", "--roles", "os:operator", "--crt-ttl", "30s")
		old = clientCert(t, short)
	}

	if life := old.NotAfter.Sub(old.NotBefore); life != 30*time.Second {
		t.Fatalf("config new --crt-ttl 30s made a certificate of %s", life)
	}

	time.Sleep(time.Until(renewal.ClientRenewAt(old).Add(500 * time.Millisecond)))

	res := c.ctl(t, short, "hostname")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("hostname with the renewal due: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	renewed := clientCert(t, short)
	if renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || renewed.NotAfter.Sub(renewed.NotBefore) > 30*time.Second {
		t.Fatalf("not renewed as asked: serial %x → %x, lifetime %s", old.SerialNumber, renewed.SerialNumber, renewed.NotAfter.Sub(renewed.NotBefore))
	}

	time.Sleep(time.Until(old.NotAfter.Add(time.Second)))

	if out := c.ok(t, short, "-n", c.all(), "memory"); len(tableRows(out)) != 3 {
		t.Fatalf("memory after the old certificate expired:\n%s", out)
	}

	cfg, err := certs.LoadClientConfig(short)
	if err != nil {
		t.Fatal(err)
	}

	if st, err := os.Stat(short); err != nil || st.Mode().Perm() != 0o600 || len(cfg.Contexts) != 1 {
		t.Fatalf("renewed client config: %v %v", st.Mode(), err)
	}
}

func clientCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()

	cfg, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	_, ctx, err := cfg.Current()
	if err != nil {
		t.Fatal(err)
	}

	cert, err := ca.ParseCertificate(ctx.Crt)
	if err != nil {
		t.Fatal(err)
	}

	return cert
}

// cliApidRestart restarts the endpoint's apid through that apid: the reply
// must arrive (the restart runs after it), and a new apid must serve.
func cliApidRestart(t *testing.T, c *cliCluster) {
	cp := c.Nodes[0]

	pids := pidsOf(binDir+"/apid", c.StatePath(cp)+"/")
	if len(pids) != 1 {
		t.Fatalf("apid processes of %s: %v", cp.Name, pids)
	}

	if out := c.ok(t, c.admin(), "service", "apid", "restart"); !strings.Contains(out, `Service "apid" restarting`) {
		t.Fatalf("restarting apid through itself: %s", out)
	}

	waitUntil(t, "a new apid to serve", func() bool {
		now := pidsOf(binDir+"/apid", c.StatePath(cp)+"/")

		return len(now) == 1 && now[0] != pids[0] && c.ctl(t, c.admin(), "version").code == 0
	})
}

func cliApidKilled(t *testing.T, c *cliCluster) {
	cp := c.Nodes[0]

	pids := pidsOf(binDir+"/apid", c.StatePath(cp)+"/")
	if len(pids) != 1 {
		t.Fatalf("apid processes of %s: %v", cp.Name, pids)
	}

	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	waitUntil(t, "the CLI to work again", func() bool { return c.ctl(t, c.admin(), "version").code == 0 })

	if now := pidsOf(binDir+"/apid", c.StatePath(cp)+"/"); len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("apid after the kill: %v (was %d)", now, pids[0])
	}

	res := c.ctl(t, c.admin(), "-e", "127.6.0.14", "hostname")
	if res.code == 0 || !strings.Contains(res.stderr, "cannot reach endpoint 127.6.0.14: dial tcp 127.6.0.14:50000: connect: connection refused") {
		t.Fatalf("an endpoint nobody listens on: exit %d\n%s", res.code, res.stderr)
	}
}

func cliDeadNode(t *testing.T, c *cliCluster) {
	dead := c.Nodes[2]

	if err := syscall.Kill(dead.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// apid dies with its machined; should one linger, it is killed too.
	waitUntil(t, "the dead node's apid to be gone", func() bool {
		for _, pid := range pidsOf(binDir+"/apid", c.StatePath(dead)+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}

		return refusesConnections(dead.Address)
	})

	res := c.ctl(t, c.admin(), "-n", c.all(), "memory")

	rows := tableRows(res.stdout)
	if res.code == 0 || len(rows) != 3 || rows[0][0] != c.Nodes[0].Address || rows[1][0] != c.Nodes[1].Address ||
		rows[2][0] != dead.Address || rows[2][1] != "error:" ||
		!strings.Contains(res.stdout, "unreachable (apid could not connect to the node)") || strings.Contains(res.stdout, "connection refused") {
		t.Fatalf("memory with a dead node: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	if !strings.Contains(res.stderr, "1 of 3 nodes failed: "+dead.Address) {
		t.Fatalf("stderr: %s", res.stderr)
	}
}

// tableRows splits a table's rows (the header left out) into fields.
func tableRows(out string) [][]string {
	lines := strings.Split(strings.TrimSpace(out), "\n")

	rows := make([][]string, 0, len(lines))
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}

	return rows
}
