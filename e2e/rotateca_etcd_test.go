package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/rollout/etcdca"
)

// rotateEtcdTimeout bounds one run of rotate-ca --ca etcd: each of its
// steps restarts the three members one at a time.
const rotateEtcdTimeout = 2 * etcdTimeout

// TestRotateEtcdCA rotates the etcd CA of three control planes and a
// worker (process runtime: the test is about etcd, not containers), on one
// cluster for every case:
//   - aegisctl rotate-ca --ca etcd's dry run names the members and skips
//     the worker; an outright swap of the etcd CA is refused;
//   - a rotation whose CLI is killed in step 1 is rolled back to the old CA
//     alone;
//   - a rotation stopped after step 2 and resumed completes while a writer
//     creates and revokes tokens through every control plane, with no
//     failed write: quorum held; each member restarts once per change of
//     its trusted CAs, never two at once (their ports are watched), and
//     trustd follows without a restart; etcd refuses a client certificate
//     of the old CA at the end, the worker holds no etcd CA and --secrets
//     puts the new etcd CA into the bundle;
//   - a step applied to every control plane at once takes its turns;
//   - with a control plane down, a rotation is refused, naming it.
//
// The OS CA's rotation record is never touched.
func TestRotateEtcdCA(t *testing.T) {
	t.Parallel()
	lc := etcdCluster(t, "rotetcd", "127.9.46.0/24", 3, 1, false)
	c := &cliCluster{Cluster: lc, home: t.TempDir(), dir: t.TempDir()}
	talos := talosClient(t, c.admin())
	ctx := etcdCtx(t)
	cps := c.ControlPlanes()

	var names []string
	for _, cp := range cps {
		names = append(names, cp.Name)
	}

	eventually(t, "three voters", func() error { return votersAre(ctx, talos, cps[0].Address, names...) })

	old := etcdCAOf(t, c, cps[0])

	t.Run("dry run", func(t *testing.T) {
		out := c.ok(t, c.admin(), "rotate-ca", "--ca", "etcd")
		for _, want := range []string{"Dry run", "members (3)", "skipped: 1 workers", "would run step 3: drop the old etcd CA"} {
			if !strings.Contains(out, want) {
				t.Errorf("the plan lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("an outright swap is refused", func(t *testing.T) {
		checkEtcdSwapRefused(ctx, t, talos, cps[0].Address, catest.NewCA(t, ca.ECDSAP256, time.Now().Add(-time.Minute)))
	})
	t.Run("the CLI killed in step 1, rolled back", func(t *testing.T) { checkEtcdRollback(t, c, old.Cert) })
	t.Run("rotation under writes", func(t *testing.T) { checkEtcdRotation(t, c, talos, old) })
	t.Run("a control plane down stops the rotation, named", func(t *testing.T) { checkEtcdMemberDown(t, c) })

	resp, err := rotation.NewRotationServiceClient(talos.Conn()).Get(etcdCtx(t), &rotation.GetRequest{Ca: "os"})
	if err != nil {
		t.Fatal(err)
	}

	if r := resp.GetMessages()[0].GetRotation(); r != nil {
		t.Errorf("the etcd CA's rotation wrote the OS CA's record: %v", r)
	}
}

// checkEtcdRollback kills the CLI once the first control plane accepts the
// new etcd CA: --rollback leaves every member trusting and issuing from the
// old CA alone, and removes the key file.
func checkEtcdRollback(t *testing.T, c *cliCluster, old *x509.Certificate) {
	cli := startRotation(t, c, "--ca", "etcd", "--dry-run=false")
	if !cli.waitFor("step 1 (") {
		t.Fatal("the CLI ended before step 1")
	}

	first := c.ControlPlanes()[0]
	waitUntil(t, first.Name+" accepts a second etcd CA", func() bool {
		cfg, err := certs.LoadMachineConfig(c.ConfigPath(first), time.Now())

		return err == nil && len(cfg.Cluster.Etcd.AcceptedCAs) > 0
	})

	cli.kill(t)

	res := runRotateEtcd(t, c, "--rollback")
	if res.code != 0 || !strings.Contains(res.stdout, "rolled back") {
		t.Fatalf("rollback: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	for _, cp := range c.ControlPlanes() {
		cfg, err := certs.LoadMachineConfig(c.ConfigPath(cp), time.Now())
		if err != nil {
			t.Fatal(err)
		}

		if len(cfg.Cluster.Etcd.AcceptedCAs) != 0 || !cfg.EtcdCA().Cert.Equal(old) {
			t.Errorf("%s after the rollback: etcd CA %s, %d accepted", cp.Name, cfg.EtcdCA().Cert.Subject, len(cfg.Cluster.Etcd.AcceptedCAs))
		}
	}

	if _, err := os.Stat(c.admin() + ".rotate-etcd-ca.pem"); !os.IsNotExist(err) {
		t.Errorf("the new etcd CA's key file outlived the rollback: %v", err)
	}
}

// checkEtcdRotation runs the whole rotation, then a step applied to every
// control plane at once, while tokens are written through every control
// plane and the members' ports are watched: no write fails, each member's
// ports close once per restart (three), never two members' at once, and
// trustd does not restart. After the rotation every control plane is on
// the new etcd CA alone, the worker holds none, and etcd refuses a client
// certificate of the old CA.
func checkEtcdRotation(t *testing.T, c *cliCluster, talos *client.Client, old *ca.CA) {
	ctx := etcdCtx(t)
	cps := c.ControlPlanes()
	nodes := make([]string, len(cps))

	for i, cp := range cps {
		nodes[i] = cp.Address
	}

	osBefore := bundleOf(t, c).Certs.OS.Crt
	trustds := servicePIDs(ctx, t, talos, nodes, "trustd")
	w := startTokenWriter(t, clusterAdmin(t, c.Cluster), cps)
	watch := watchEtcdPorts(cps)

	newCA := rotateEtcdResumed(t, c)

	if newCA.Cert.Equal(old.Cert) {
		t.Fatal("the etcd CA did not change")
	}

	for _, cp := range cps {
		if !etcdCAOf(t, c, cp).Cert.Equal(newCA.Cert) {
			t.Errorf("%s issues from another etcd CA than %s", cp.Name, cps[0].Name)
		}
	}

	if string(bundleOf(t, c).Certs.Etcd.Crt) != string(newCA.CertPEM) || string(bundleOf(t, c).Certs.OS.Crt) != string(osBefore) {
		t.Error("--secrets: the bundle's etcd CA is not the new one, or its OS CA changed")
	}

	verifyDropped(t, c, old, newCA)
	checkWorkerUntouched(t, c)
	checkOldEtcdCARefused(t, cps[0], old, newCA)

	// A step sent to every control plane at once (another CA accepted):
	// the members take their turns by themselves.
	third := catest.NewCA(t, ca.ECDSAP256, time.Now().Add(-time.Minute))
	checkConcurrentAccept(ctx, t, talos, &etcdca.Rotation{Client: talos, Nodes: nodes, Old: newCA.Cert, New: third})

	ok, retried, failed := w.stop()
	downs := watch.stop()

	t.Logf("FIGURE etcd CA rotation: %d tokens created and revoked through etcd, %d writes sent twice (Unavailable as a member stopped), %d failed",
		ok, retried, len(failed))

	for _, d := range downs {
		t.Logf("FIGURE etcd CA rotation: %s's %s port closed for %s", d.node, d.port, d.took.Round(time.Millisecond))
	}

	if len(failed) > 0 {
		t.Errorf("%d writes failed during the rotation, first: %v", len(failed), failed[0])
	}

	if ok < 10 {
		t.Errorf("only %d writes during the rotation: the writer did not run", ok)
	}

	// Step 1, step 3, and the step applied at once.
	checkEtcdDowntimes(t, downs, 3)

	// trustd's etcd client followed the trusted CAs without a restart.
	for node, pid := range servicePIDs(ctx, t, talos, nodes, "trustd") {
		if pid != trustds[node] {
			t.Errorf("trustd restarted on %s during the rotation: PID %d, was %d", node, pid, trustds[node])
		}
	}
}

// rotateEtcdResumed runs rotate-ca --ca etcd until step 2, then resumes it
// with --secrets: the resume catches every member up with step 2 from the
// new CA a control plane holds. It returns the new etcd CA.
func rotateEtcdResumed(t *testing.T, c *cliCluster) *ca.CA {
	start := time.Now()
	first := runRotateEtcd(t, c, "--until-step", "2")
	res := runRotateEtcd(t, c, "--resume", "--secrets", c.SecretsPath())
	took := time.Since(start)

	if first.code != 0 || res.code != 0 || !strings.Contains(res.stdout, "catching up with step 2: done") ||
		!strings.Contains(res.stdout, "etcd CA is the new one") {
		t.Fatalf("rotate-ca --ca etcd: exit %d, then (--resume) %d\n%s%s%s%s", first.code, res.code, first.stdout, first.stderr, res.stdout, res.stderr)
	}

	t.Logf("FIGURE rotate-ca --ca etcd on 3 control planes: %s", took.Round(time.Millisecond))

	for _, line := range strings.Split(first.stdout+res.stdout, "\n") {
		if strings.Contains(line, ": done in ") {
			t.Logf("FIGURE   %s", line)
		}
	}

	return etcdCAOf(t, c, c.ControlPlanes()[0])
}

// verifyDropped checks with etcdca's Verify what every running
// member loaded: only the new CA trusted, every etcd certificate from it.
func verifyDropped(t *testing.T, c *cliCluster, old, newCA *ca.CA) {
	talos := talosClient(t, c.admin())
	r := &etcdca.Rotation{Client: talos, Old: old.Cert, New: newCA}

	for _, cp := range c.ControlPlanes() {
		if err := r.Verify(client.WithNode(etcdCtx(t), cp.Address), etcdca.Drop); err != nil {
			t.Errorf("%s: %v", cp.Name, err)
		}
	}

	resp, err := rotation.NewRotationServiceClient(talos.Conn()).Get(etcdCtx(t), &rotation.GetRequest{Ca: "etcd"})
	if err != nil {
		t.Fatal(err)
	}

	if got := resp.GetMessages()[0].GetRotation(); got.GetStep() != rotationstate.StepDone || got.GetCa() != "etcd" {
		t.Errorf("the etcd rotation's record: %v", got)
	}

	if _, err := os.Stat(c.admin() + ".rotate-etcd-ca.pem"); !os.IsNotExist(err) {
		t.Errorf("the new etcd CA's key file outlived step 2: %v", err)
	}
}

// checkEtcdMemberDown: with a control plane stopped (the other two keep
// quorum), a rotation refuses to start, names it and records nothing.
func checkEtcdMemberDown(t *testing.T, c *cliCluster) {
	cps := c.ControlPlanes()
	down := cps[len(cps)-1]
	before, err := certs.LoadMachineConfig(c.ConfigPath(cps[0]), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	if err := c.StopNode(down.Name); err != nil {
		t.Fatal(err)
	}

	res := runRotateEtcd(t, c)
	if res.code == 0 || !strings.Contains(res.stderr, down.Address) || !strings.Contains(res.stderr, "locked out") {
		t.Fatalf("a rotation with %s down: exit %d\n%s%s", down.Name, res.code, res.stdout, res.stderr)
	}

	for _, cp := range cps[:len(cps)-1] {
		cfg, err := certs.LoadMachineConfig(c.ConfigPath(cp), time.Now())
		if err != nil {
			t.Fatal(err)
		}

		if !cfg.EtcdCA().Cert.Equal(before.EtcdCA().Cert) || !reflect.DeepEqual(cfg.Cluster.Etcd.AcceptedCAs, before.Cluster.Etcd.AcceptedCAs) {
			t.Errorf("a rotation that stopped for %s changed %s's etcd CAs", down.Name, cp.Name)
		}
	}

	if res := runRotateEtcd(t, c, "--resume"); res.code == 0 || !strings.Contains(res.stderr, "no rotation") {
		t.Fatalf("a rotation was recorded although none started: %s", res.stderr)
	}
}

// checkWorkerUntouched: a worker holds no etcd CA before or after.
func checkWorkerUntouched(t *testing.T, c *cliCluster) {
	for _, n := range c.Nodes {
		if n.Type.IsControlPlane() {
			continue
		}

		cfg, err := certs.LoadMachineConfig(c.ConfigPath(n), time.Now())
		if err != nil {
			t.Fatal(err)
		}

		if cfg.Cluster.Etcd.CA != nil || len(cfg.Cluster.Etcd.AcceptedCAs) != 0 {
			t.Errorf("the rotation gave worker %s an etcd CA", n.Name)
		}
	}
}

// bundleOf is the cluster's secrets bundle as it is on disk.
func bundleOf(t *testing.T, c *cliCluster) *certs.Bundle {
	t.Helper()

	b, err := certs.LoadBundle(c.SecretsPath(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	return b
}

// etcdCAOf is the etcd CA in n's config on disk, which ApplyConfiguration
// replaces with the config in effect.
func etcdCAOf(t *testing.T, c *cliCluster, n localcluster.Node) *ca.CA {
	t.Helper()

	cfg, err := certs.LoadMachineConfig(c.ConfigPath(n), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	if cfg.EtcdCA() == nil {
		t.Fatalf("%s holds no etcd CA", n.Name)
	}

	return cfg.EtcdCA()
}

// runRotateEtcd runs rotate-ca --ca etcd --dry-run=false with args, with
// room for three rolling restarts.
func runRotateEtcd(t *testing.T, c *cliCluster, args ...string) cliResult {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), rotateEtcdTimeout)
	defer cancel()

	var stdout, stderr bytes.Buffer

	all := append([]string{"--aegisconfig", c.admin(), "rotate-ca", "--ca", "etcd", "--dry-run=false"}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "aegisctl"), all...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH")}

	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}

	var exit *exec.ExitError

	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("aegisctl rotate-ca --ca etcd: %v", err)
	}

	return res
}
