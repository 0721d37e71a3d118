package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The CA rotation tests' cluster: one control plane, two workers.
const rotateCIDR = "127.6.14.0/28"

// TestRotateCA rotates the OS CA of a 1+2 cluster through aegisctl:
// a rollback from step 1 leaves the cluster as it was; a rotation stopped
// after step 1 and after step 2 and resumed completes while 8 clients call
// Version on every node, switching to the new client config between steps
// 2 and 3, with zero failed calls.
func TestRotateCA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}

	c := startClusterIn(t, "rotca", rotateCIDR, 2)
	admin := talosClient(t, c.admin())

	waitUntil(t, "every node is a member", func() bool { return membersAre(testContext(t), admin, c.Nodes) == nil })

	t.Run("dry run and rollback from step 1", func(t *testing.T) { checkRotateRollback(t, c) })
	t.Run("rotation under load, resumed after steps 1 and 2", func(t *testing.T) { checkRotateUnderLoad(t, c) })
	t.Run("the CLI killed in step 2, then resumed", func(t *testing.T) { checkRotateKilled(t, c) })
	t.Run("a worker that joins after step 1 is caught up", func(t *testing.T) { checkRotateCatchUp(t, c) })
	t.Run("a member down stops the rotation, named", func(t *testing.T) { checkRotateMemberDown(t, c) })
}

// checkRotateCatchUp: a worker made from the secrets bundle joins while a
// rotation waits after step 1; --resume brings it to step 1 first, and it
// ends on the new CA alone like the others.
func checkRotateCatchUp(t *testing.T, c *cliCluster) {
	c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--until-step", "1")

	last := netip.MustParseAddr(c.Nodes[len(c.Nodes)-1].Address)
	if _, err := c.AddNode(testContext(t), localcluster.NodeSpec{Name: "joined-mid-rotation", Type: certs.NodeWorker, Address: last.Next().String()}, waitTimeout); err != nil {
		t.Fatal(err)
	}

	admin := talosClient(t, c.admin())
	waitUntil(t, "the new worker is a member", func() bool { return membersAre(testContext(t), admin, c.Nodes) == nil })

	out := c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--resume", "--secrets", c.SecretsPath())
	if !strings.Contains(out, "catching up with step 1: done") {
		t.Errorf("no catch-up:\n%s", out)
	}

	newCA, err := ca.ParseCertificate(contextOf(t, c.admin()).CA)
	if err != nil {
		t.Fatal(err)
	}

	for name, cas := range acceptedOf(t, c) {
		if len(cas) != 1 || !cas[0].Equal(newCA) {
			t.Errorf("%s accepts %d CAs, not the newest alone", name, len(cas))
		}
	}

	c.ok(t, c.admin(), "-n", c.all(), "version")
}

// checkRotateKilled kills the CLI (SIGKILL) as it starts step 2: --resume
// completes the rotation from whatever it left.
func checkRotateKilled(t *testing.T, c *cliCluster) {
	cli := startRotation(t, c, "--dry-run=false")
	if !cli.waitFor("step 2 (") {
		t.Fatal("the CLI ended before step 2")
	}

	cli.kill(t)

	c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--resume", "--secrets", c.SecretsPath())

	newCA, err := ca.ParseCertificate(contextOf(t, c.admin()).CA)
	if err != nil {
		t.Fatalf("the client config's CA bundle is not the new CA alone: %v", err)
	}

	for name, cas := range acceptedOf(t, c) {
		if len(cas) != 1 || !cas[0].Equal(newCA) {
			t.Errorf("%s accepts %d CAs, not the newest alone", name, len(cas))
		}
	}

	c.ok(t, c.admin(), "-n", c.all(), "version")
}

// checkRotateMemberDown: with a worker stopped, a rotation refuses to
// start, names the worker and changes nothing.
func checkRotateMemberDown(t *testing.T, c *cliCluster) {
	before := acceptedOf(t, c)
	w := c.Nodes[len(c.Nodes)-1]

	if err := c.StopNode(w.Name); err != nil {
		t.Fatal(err)
	}

	res := c.ctl(t, c.admin(), "rotate-ca", "--dry-run=false")
	if res.code == 0 || !strings.Contains(res.stderr, w.Address) || !strings.Contains(res.stderr, "locked out") {
		t.Fatalf("a rotation with %s down: code %d\n%s%s", w.Name, res.code, res.stdout, res.stderr)
	}

	if got := acceptedOf(t, c); !equalAccepted(got, before) {
		t.Fatal("a rotation that stopped for a member down changed the accepted CAs")
	}

	if res := c.ctl(t, c.admin(), "rotate-ca", "--dry-run=false", "--resume"); res.code == 0 || !strings.Contains(res.stderr, "no rotation") {
		t.Fatalf("a rotation was recorded although none started: %s", res.stderr)
	}
}

// The three-control-plane rotation's cluster.
const rotate3CIDR = "127.6.15.0/28"

// TestRotateCAThreeControlPlanes rotates the OS CA of a 3+2 cluster (three
// etcd members) under the same load: zero failed calls.
func TestRotateCAThreeControlPlanes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}

	needBinaries(t)

	lc, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "rotca3", ControlPlanes: 3, Workers: 2, CIDR: netip.MustParsePrefix(rotate3CIDR),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: waitTimeout, Runtime: certs.RuntimeProcess,
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
	admin := talosClient(t, c.admin())

	waitUntil(t, "every node is a member", func() bool { return membersAre(testContext(t), admin, c.Nodes) == nil })
	checkRotateUnderLoad(t, c)
}

// acceptedOf reads the accepted CAs of every node's config on disk, which
// ApplyConfiguration replaces with the config in effect.
func acceptedOf(t *testing.T, c *cliCluster) map[string][]*x509.Certificate {
	t.Helper()

	out := map[string][]*x509.Certificate{}

	for _, n := range c.Nodes {
		cfg, err := certs.LoadMachineConfig(c.ConfigPath(n), time.Now())
		if err != nil {
			t.Fatal(err)
		}

		out[n.Name] = cfg.AcceptedCAs().Certificates()
	}

	return out
}

func sameCAs(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}

	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}

	return true
}

func checkRotateRollback(t *testing.T, c *cliCluster) {
	before := acceptedOf(t, c)

	dry := c.ok(t, c.admin(), "rotate-ca")
	if !strings.Contains(dry, "Dry run") || !strings.Contains(dry, "stop working") {
		t.Errorf("dry run output:\n%s", dry)
	}

	if got := acceptedOf(t, c); !equalAccepted(got, before) {
		t.Fatal("a dry run changed the accepted CAs")
	}

	c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--until-step", "1")

	for name, cas := range acceptedOf(t, c) {
		if len(cas) != len(before[name])+1 {
			t.Fatalf("%s accepts %d CAs after step 1, want %d", name, len(cas), len(before[name])+1)
		}
	}

	// A second run neither starts another rotation nor goes on unasked.
	if res := c.ctl(t, c.admin(), "rotate-ca", "--dry-run=false"); res.code == 0 || !strings.Contains(res.stderr, "--resume") {
		t.Errorf("a run over a rotation in progress: code %d, %s", res.code, res.stderr)
	}

	c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--rollback")

	if got := acceptedOf(t, c); !equalAccepted(got, before) {
		t.Fatal("the rollback did not restore the accepted CAs")
	}

	if _, err := os.Stat(c.admin() + ".rotate-os-ca.pem"); !os.IsNotExist(err) {
		t.Errorf("the new CA's key file is left after a rollback: %v", err)
	}

	c.ok(t, c.admin(), "-n", c.all(), "version")
}

func equalAccepted(a, b map[string][]*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}

	for k := range a {
		if !sameCAs(a[k], b[k]) {
			return false
		}
	}

	return true
}

// callLoad is clients calling Version on every node until stopped.
type callLoad struct {
	client        atomic.Pointer[client.Client]
	calls, failed atomic.Int64
	firstErr      atomic.Value
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startLoad(t *testing.T, c *cliCluster, cl *client.Client, workers int) *callLoad {
	l := &callLoad{stop: make(chan struct{})}
	l.client.Store(cl)

	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}

				l.call(t, c)
			}
		})
	}

	return l
}

func (l *callLoad) call(t *testing.T, c *cliCluster) {
	ctx, cancel := context.WithTimeout(client.WithNodes(context.Background(), c.Addresses()...), timeout)
	defer cancel()

	resp, err := l.client.Load().Version(ctx)

	l.calls.Add(1)

	if err == nil && len(resp.GetMessages()) != len(c.Nodes) {
		err = errorf("%d replies, want %d", len(resp.GetMessages()), len(c.Nodes))
	}

	for _, m := range resp.GetMessages() {
		if e := m.GetMetadata().GetError(); err == nil && e != "" { //nolint:staticcheck // the field apid fills
			err = errorf("%s: %s", m.GetMetadata().GetHostname(), e)
		}
	}

	if err != nil {
		l.failed.Add(1)
		l.firstErr.CompareAndSwap(nil, err.Error())
		t.Logf("failed call: %v", err)
	}
}

func (l *callLoad) end() (calls, failed int64) {
	close(l.stop)
	l.wg.Wait()

	return l.calls.Load(), l.failed.Load()
}

var stepDone = regexp.MustCompile(`(?m)^(step \d) \([^)]*\): done in (\S+)$`)

func checkRotateUnderLoad(t *testing.T, c *cliCluster) {
	oldCfg := filepath.Join(c.dir, "old-admin")
	copyFile(t, c.admin(), oldCfg)

	l := startLoad(t, c, talosClient(t, c.admin()), 8)
	defer func() {
		select {
		case <-l.stop:
		default:
			l.end()
		}
	}()

	start := time.Now()
	out := c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--until-step", "1")

	// Until step 2 the new CA's key is kept beside the client config, 0600.
	if fi, err := os.Stat(c.admin() + ".rotate-os-ca.pem"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new CA's key file after step 1: %v, %v", fi, err)
	}

	// A worker renews through trustd during the rotation.
	renewWorker(t, c)

	out += c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--resume", "--until-step", "2")
	if !strings.Contains(out, "keep working until step 3") {
		t.Errorf("step 2 does not say old client configs keep working:\n%s", out)
	}

	// The clients switch to the new client config between steps 2 and 3,
	// and the worker renews again, now from the new CA.
	l.client.Store(talosClient(t, c.admin()))
	renewWorker(t, c)

	out += c.ok(t, c.admin(), "rotate-ca", "--dry-run=false", "--resume", "--secrets", c.SecretsPath())
	elapsed := time.Since(start)

	calls, failed := l.end()
	for _, m := range stepDone.FindAllStringSubmatch(out, -1) {
		t.Logf("FIGURE rotate-ca %s: %s took %s", shape(c), m[1], m[2])
	}

	t.Logf("FIGURE rotate-ca %s: whole rotation (three CLI runs and two worker renewals) %s; %d Version calls on %d nodes made, %d failed",
		shape(c), elapsed.Round(time.Millisecond), calls, len(c.Nodes), failed)

	if failed != 0 || calls == 0 {
		t.Fatalf("%d of %d calls failed during the rotation: %v", failed, calls, l.firstErr.Load())
	}

	checkOnlyNewCA(t, c, oldCfg)

	if _, err := os.Stat(c.admin() + ".rotate-os-ca.pem"); !os.IsNotExist(err) {
		t.Errorf("the new CA's key file is left after the rotation: %v", err)
	}

	checkLateWorkerJoins(t, c)
}

// checkLateWorkerJoins: a worker whose config is generated from the
// secrets bundle the rotation updated joins the rotated cluster.
func checkLateWorkerJoins(t *testing.T, c *cliCluster) {
	t.Helper()

	last := netip.MustParseAddr(c.Nodes[len(c.Nodes)-1].Address)

	n, err := c.AddNode(testContext(t), localcluster.NodeSpec{Name: "late-worker", Type: certs.NodeWorker, Address: last.Next().String()}, waitTimeout)
	if err != nil {
		t.Fatalf("a worker made from the updated secrets bundle: %v", err)
	}

	c.ok(t, c.admin(), "-n", n.Address, "version")

	// A rotation reaches the members the cluster lists: the next one
	// waits for this worker's entry.
	admin := talosClient(t, c.admin())
	waitUntil(t, "the late worker is a member", func() bool { return membersAre(testContext(t), admin, c.Nodes) == nil })
}

// renewWorker has a worker re-issue its certificate through trustd.
func renewWorker(t *testing.T, c *cliCluster) {
	t.Helper()

	w := workerOf(c)
	before := serverCertOf(t, w.Address)

	callReissue(t, c, w.Address)

	// Reissue answers once the certificate is issued; apid takes it from
	// the node's resources a moment later, without a restart.
	for start := time.Now(); serverCertOf(t, w.Address).Equal(before); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Fatal("the worker serves the same certificate 2 s after its renewal")
		}
	}
}

// checkOnlyNewCA: every node accepts the new CA alone, and a client
// certificate of the old CA is refused everywhere.
func checkOnlyNewCA(t *testing.T, c *cliCluster, oldCfg string) {
	t.Helper()

	newCtx, oldCtx := contextOf(t, c.admin()), contextOf(t, oldCfg)

	newCA, err := ca.ParseCertificate(newCtx.CA)
	if err != nil {
		t.Fatalf("the client config's CA bundle holds more than the new CA: %v", err)
	}

	for name, cas := range acceptedOf(t, c) {
		if len(cas) != 1 || !cas[0].Equal(newCA) {
			t.Errorf("%s accepts %d CAs, not the new one alone", name, len(cas))
		}
	}

	pair, err := tls.X509KeyPair(oldCtx.Crt, oldCtx.Key)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(newCA)

	for _, n := range c.Nodes {
		if got := serverCertOf(t, n.Address); got.CheckSignatureFrom(newCA) != nil {
			t.Errorf("%s serves a certificate not from the new CA", n.Name)
		}

		cl, err := client.New(testContext(t), client.WithEndpoints(n.Address),
			client.WithTLSConfig(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}))
		if err != nil {
			t.Fatal(err)
		}

		if _, err := cl.Version(testContext(t)); err == nil {
			t.Errorf("%s served a client certificate of the old CA", n.Name)
		}

		cl.Close() //nolint:errcheck // done
	}

	if res := c.ctl(t, oldCfg, "version"); res.code == 0 {
		t.Error("the old client config still works after step 3")
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func copyFile(t *testing.T, from, to string) {
	t.Helper()

	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func workerOf(c *cliCluster) localcluster.Node {
	for _, n := range c.Nodes {
		if n.Type == certs.NodeWorker {
			return n
		}
	}

	return localcluster.Node{}
}

// serverCertOf is the certificate a node's apid serves now: what a client
// gets before it verifies anything.
func serverCertOf(t *testing.T, addr string) *x509.Certificate {
	t.Helper()

	conn, err := tls.Dial("tcp", net.JoinHostPort(addr, "50000"), &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the certificate is read, not trusted
		MinVersion:         tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	return conn.ConnectionState().PeerCertificates[0]
}

// callReissue asks a node, through the endpoint, to re-issue its certificates.
func callReissue(t *testing.T, c *cliCluster, addr string) {
	t.Helper()

	admin := talosClient(t, c.admin())

	resp, err := rotation.NewRotationServiceClient(admin.Conn()).Reissue(client.WithNode(testContext(t), addr), &rotation.ReissueRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if len(resp.GetMessages()) != 1 || len(resp.GetMessages()[0].GetCertificates()) == 0 {
		t.Fatalf("re-issue reply: %v", resp)
	}
}

// shape is the cluster's "control planes+workers".
func shape(c *cliCluster) string {
	cps := len(c.ControlPlanes())

	return fmt.Sprintf("%d+%d nodes", cps, len(c.Nodes)-cps)
}

// rotationCLI is a rotate-ca run in the background, read line by line, for
// the tests that kill it at a given point.
type rotationCLI struct {
	cmd     *exec.Cmd
	scanner *bufio.Scanner
}

// startRotation starts aegisctl rotate-ca with args as the cluster's admin.
func startRotation(t *testing.T, c *cliCluster, args ...string) *rotationCLI {
	t.Helper()

	cmd := exec.Command(filepath.Join(binDir, "aegisctl"), append([]string{"--aegisconfig", c.admin(), "rotate-ca"}, args...)...)
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH")}

	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}

	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	return &rotationCLI{cmd: cmd, scanner: bufio.NewScanner(out)}
}

// waitFor reads the CLI's output until a line starts with prefix, and
// reports whether one did before the output ended.
func (r *rotationCLI) waitFor(prefix string) bool {
	for r.scanner.Scan() {
		if strings.HasPrefix(r.scanner.Text(), prefix) {
			return true
		}
	}

	return false
}

// kill ends the CLI at once, as an operator's lost session would.
func (r *rotationCLI) kill(t *testing.T) {
	t.Helper()

	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	_ = r.cmd.Wait() // killed: its status says so
}
