package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/token"
)

// The static token rotation's cluster lives in 127.6.10.0/28; the worker
// started during the overlap and the other joining clients call from
// elsewhere in 127.6.10.0/24.
const (
	tokenRotateCIDR   = "127.6.10.0/28"
	rotateExtraWorker = "127.6.10.20"
	rotateOldClient   = "127.6.10.21"
	rotateNewClient   = "127.6.10.22"
	rotateLateWorker  = "127.6.10.23"
)

// rotateEnv is a 1+1 cluster with the configs it started with.
type rotateEnv struct {
	*cliCluster

	top        *testing.T // the whole test's, for what outlives a subtest
	cp, worker localcluster.Node
	oldCP      *certs.MachineConfig // the control plane's config before the rotation
	fresh      token.Token
	extra      *machinedProc // the worker that joins during the overlap
}

// TestTokenRotateStatic rotates the static token of a real 1+1 cluster
// with aegisctl: the dry run changes nothing; during the overlap a new
// worker joins with the new token and a client still obtains a
// certificate with the old one; after the old one is dropped it is
// refused and the new one works; every config on disk and the secrets
// bundle carry the new token.
func TestTokenRotateStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}

	c := startClusterIn(t, "rotate", tokenRotateCIDR, 1)
	e := &rotateEnv{cliCluster: c, top: t, cp: c.ControlPlanes()[0], oldCP: loadConfig(t, c.ConfigPath(c.ControlPlanes()[0]))}

	for _, n := range c.Nodes {
		if n.Type == certs.NodeWorker {
			e.worker = n
		}
	}

	var err error
	if e.fresh, err = token.Generate(rand.Reader); err != nil {
		t.Fatal(err)
	}

	t.Run("dry run", func(t *testing.T) { checkRotateDryRun(t, e) })
	t.Run("overlap", func(t *testing.T) { checkRotateOverlap(t, e) })
	t.Run("old token dropped", func(t *testing.T) { checkRotateDrop(t, e) })
	t.Run("a worker down stops before step 3", func(t *testing.T) { checkRotateWorkerDown(t, e) })
}

func loadConfig(t *testing.T, path string) *certs.MachineConfig {
	t.Helper()

	cfg, err := certs.LoadMachineConfig(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	return cfg
}

// waitMembers waits until the membership list names every host: the
// rotation works on the members it lists.
func (e *rotateEnv) waitMembers(t *testing.T, hosts ...string) {
	t.Helper()

	waitUntil(t, "the members "+strings.Join(hosts, ", ")+" to be listed", func() bool {
		out := e.ok(t, e.admin(), "get", "members")

		for _, h := range hosts {
			if !strings.Contains(out, h) {
				return false
			}
		}

		return true
	})
}

// checkRotateDryRun: the plan names every member; nothing changes.
func checkRotateDryRun(t *testing.T, e *rotateEnv) {
	e.waitMembers(t, e.cp.Address, e.worker.Address)

	out := e.ok(t, e.admin(), "token", "rotate-static")

	for _, want := range []string{"Dry run: nothing changed", e.cp.Address, e.worker.Address, "controlplane", "worker"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, out)
		}
	}

	if got := loadConfig(t, e.ConfigPath(e.cp)); got.Machine.Token != e.oldCP.Machine.Token || len(got.Machine.PreviousTokens) > 0 {
		t.Fatal("a dry run changed the control plane's config")
	}
}

// checkRotateOverlap runs steps 1 and 2 (--keep-overlap): both tokens work.
func checkRotateOverlap(t *testing.T, e *rotateEnv) {
	// A node joins with the old token again and again while the rotation
	// runs: none of its joins may fail.
	stop := e.joinMeanwhile(t, e.oldCP, rotateOldClient)

	start := time.Now()
	out := e.ok(t, e.admin(), "token", "rotate-static", "--dry-run=false", "--token", e.fresh.Reveal(),
		"--overlap", "30m", "--keep-overlap", "--secrets", e.SecretsPath())
	t.Logf("FIGURE rotate-static steps 1 and 2 on 1+1 nodes (CLI run): %s", time.Since(start).Round(time.Millisecond))
	logStepFigures(t, out)

	joins, failed := stop()
	t.Logf("FIGURE rotate-static steps 1 and 2: %d joins with the old token meanwhile, %d failed", joins, len(failed))

	if joins == 0 || len(failed) > 0 {
		t.Fatalf("joins with the old token during the rotation: %d, failed: %v", joins, failed)
	}

	cp := loadConfig(t, e.ConfigPath(e.cp))
	if !cp.TrustdToken().Equal(e.fresh) || len(cp.Machine.PreviousTokens) != 1 || cp.Machine.PreviousTokens[0].Token != e.oldCP.Machine.Token ||
		time.Until(cp.Machine.PreviousTokens[0].Expires) < 25*time.Minute {
		t.Fatalf("the control plane's config after step 1: token %s, previous %d entries", cp.TrustdToken(), len(cp.Machine.PreviousTokens))
	}

	if w := loadConfig(t, e.ConfigPath(e.worker)); !w.TrustdToken().Equal(e.fresh) {
		t.Fatalf("the worker's config on disk holds %s, want the new token", w.TrustdToken())
	}

	bundle, err := certs.LoadBundle(e.SecretsPath(), time.Now())
	if err != nil || bundle.TrustdInfo.Token != e.fresh.Reveal() {
		t.Fatalf("the secrets bundle after the rotation: %v", err)
	}

	shown := e.ok(t, e.admin(), "-n", e.cp.Address, "get", "machineconfig", "-o", "yaml")
	if strings.Contains(shown, e.oldCP.TrustdToken().Secret()) || strings.Contains(shown, e.fresh.Secret()) {
		t.Fatal("get machineconfig shows a token's secret")
	}

	e.extra = e.startWorker(e.top, "rotate-extra", rotateExtraWorker, e.fresh.Reveal())
	e.extra.waitReady(t)

	// A worker made from an old config joins too: the rotation's next run
	// must give it the new token before the old one goes.
	late := e.startWorker(e.top, "rotate-late", rotateLateWorker, e.oldCP.Machine.Token)
	late.waitReady(t)

	if _, err := joinAs(t, e.cliCluster, e.oldCP, rotateOldClient, rotateOldClient); err != nil {
		t.Fatalf("the old token during the overlap: %v", err)
	}

	issued := regexp.MustCompile(`"msg":"certificate issued".*"token_id":"` + e.oldCP.TrustdToken().ID() + `".*"token_kind":"static-previous"`)

	waitUntil(t, "trustd's audit record of the issuance to the previous static token", func() bool {
		audit, err := os.ReadFile(filepath.Join(e.StatePath(e.cp), "logs", "trustd.log"))

		return err == nil && issued.Match(audit)
	})
}

// checkRotateDrop runs the rotation again to its end: step 3 drops the
// old token, which trustd refuses from then on.
func checkRotateDrop(t *testing.T, e *rotateEnv) {
	e.waitMembers(t, rotateExtraWorker, rotateLateWorker)

	start := time.Now()
	out := e.ok(t, e.admin(), "token", "rotate-static", "--dry-run=false", "--token", e.fresh.Reveal())
	t.Logf("FIGURE rotate-static resumed to step 3 on 1+3 nodes (CLI run): %s", time.Since(start).Round(time.Millisecond))
	logStepFigures(t, out)

	if !strings.Contains(out, "Step 3 done") || !strings.Contains(out, "rotate-extra") {
		t.Fatalf("rotation output:\n%s", out)
	}

	if _, err := joinAs(t, e.cliCluster, e.oldCP, rotateOldClient, rotateOldClient); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the old token after step 3: %v, want Unauthenticated", err)
	}

	withNew := *e.oldCP
	withNew.Machine.Token = e.fresh.Reveal()

	parsed, err := withNew.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	mc, err := certs.ParseMachineConfig("with the new token", parsed, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	if _, err := joinAs(t, e.cliCluster, mc, rotateNewClient, rotateNewClient); err != nil {
		t.Fatalf("the new token after step 3: %v", err)
	}

	if cp := loadConfig(t, e.ConfigPath(e.cp)); len(cp.Machine.PreviousTokens) != 0 {
		t.Fatalf("the control plane still lists %d previous tokens", len(cp.Machine.PreviousTokens))
	}

	if late := loadConfig(t, filepath.Join(e.Dir, "rotate-late", "config.yaml")); !late.TrustdToken().Equal(e.fresh) {
		t.Fatalf("the worker that joined with the old token during the overlap holds %s on disk", late.TrustdToken())
	}
}

// checkRotateWorkerDown rotates again while a listed worker is down: it
// is named, the others take the token, and the rotation stops with the
// previous token still accepted.
func checkRotateWorkerDown(t *testing.T, e *rotateEnv) {
	e.extra.stop()

	next, err := token.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	res := e.ctl(t, e.admin(), "token", "rotate-static", "--dry-run=false", "--token", next.Reveal())
	t.Logf("rotation with a worker down: exit %d\n%s%s", res.code, res.stdout, res.stderr)

	if res.code == 0 || !strings.Contains(res.stderr, "stopped before step 3") || !strings.Contains(res.stderr, "rotate-extra") ||
		strings.Contains(res.stdout, "Step 3") {
		t.Fatalf("rotation with a worker down: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	cp := loadConfig(t, e.ConfigPath(e.cp))
	if !cp.TrustdToken().Equal(next) || len(cp.Machine.PreviousTokens) != 1 || cp.Machine.PreviousTokens[0].Token != e.fresh.Reveal() {
		t.Fatal("the control plane does not hold the new token with the previous one still accepted")
	}

	if w := loadConfig(t, e.ConfigPath(e.worker)); !w.TrustdToken().Equal(next) {
		t.Fatal("the worker that is up did not take the new token")
	}
}

// joinMeanwhile joins with mc's token from source, one join after the
// other, until the function it returns is called; that returns how many
// joins were made and the errors of those that failed.
func (e *rotateEnv) joinMeanwhile(t *testing.T, mc *certs.MachineConfig, source string) func() (int, []error) {
	t.Helper()

	jc, err := join.New(join.Config{
		Endpoints: []string{e.cp.Address}, Token: mc.TrustdToken(), CAs: mc.AcceptedCAs(), CA: mc.CACertificate(),
		Hostname: source, Source: source, MaxAttempts: 1, RetryMin: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan struct{})

	var (
		joins  int
		failed []error
	)

	go func() {
		defer close(done)

		for ctx.Err() == nil {
			_, err := jc.Join(ctx)

			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				failed = append(failed, err)
			}

			joins++
		}
	}()

	return func() (int, []error) {
		cancel()
		<-done

		return joins, failed
	}
}

// logStepFigures logs the CLI's own step durations.
func logStepFigures(t *testing.T, out string) {
	t.Helper()

	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "Step ") && strings.Contains(line, " done in ") {
			t.Logf("FIGURE rotate-static %s", strings.TrimSpace(line))
		}
	}
}
