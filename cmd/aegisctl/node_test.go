package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/certapi"
)

// These tests run aegisctl in-process against in-process apid nodes (port
// 0 on 127.0.0.1) backed by apidtest's machined stand-in, so the whole
// path of a node command is real: flags, client config, TLS, routing
// metadata, fan-out, authorization, rendering.

// runCLI runs aegisctl with now as the CLI's clock and returns its output.
func runCLI(t *testing.T, now time.Time, args ...string) (stdout, stderr string, err error) {
	t.Helper()

	return runCLIClock(t, clock.NewFake(now), args...)
}

// advanceOnWait moves clk by step each time something waits on it, until
// stop is called: a command's waits on clk then pass at once.
func advanceOnWait(clk *clock.Fake, step time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		for clk.WaitForTimers(ctx, 1) == nil {
			clk.Advance(step)
		}
	}()

	return func() { cancel(); <-done }
}

// runCLIClock is runCLI reading clk.
func runCLIClock(t *testing.T, clk clock.Clock, args ...string) (stdout, stderr string, err error) {
	t.Helper()

	var out, errOut bytes.Buffer

	e := &env{clock: clk, stdout: &out, stderr: &errOut}
	cmd := newRootCommand(e)
	cmd.SetArgs(args)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	err = cmd.ExecuteContext(ctx)

	return out.String(), errOut.String(), err
}

// caAuthority is a control plane's CA for the certificate service; with
// err set it is a node that cannot issue.
type caAuthority struct {
	pki *apidtest.PKI
	err error
}

func (a caAuthority) ClientIssuer() (*ca.Issuer, []byte, error) {
	if a.err != nil {
		return nil, nil, a.err
	}

	return a.pki.Issuer(), a.pki.CA.CertPEM, nil
}

// testCluster is two in-process nodes sharing a PKI; the first one also
// serves the certificate service.
type testCluster struct {
	pki    *apidtest.PKI
	nodes  []*apidtest.Node
	config string // client config path
}

func newTestCluster(t *testing.T, authority func(*apidtest.PKI) certapi.Authority) *testCluster {
	t.Helper()

	c := &testCluster{pki: apidtest.NewPKI(t), config: filepath.Join(t.TempDir(), "aegisconfig")}

	for i := range 2 {
		cfg := apidtest.NodeConfig{IP: "127.0.0.1"}
		if i == 0 && authority != nil {
			a := authority(c.pki)
			cfg.Register = func(g *grpc.Server) { certapi.New(certapi.Config{Authority: a}).Register(g) }
		}

		c.nodes = append(c.nodes, apidtest.StartNode(t, c.pki, cfg))
	}

	return c
}

// writeConfig writes a client config with context "main" holding a client
// certificate with roles, and an untouched context "other".
func (c *testCluster) writeConfig(t *testing.T, roles ...role.Role) *certs.ClientConfig {
	t.Helper()

	pair := c.pki.Client(t, roles...)
	other := c.pki.Client(t, role.Reader)
	cfg := &certs.ClientConfig{Context: "main", Contexts: map[string]*certs.ClientContext{
		"main":  {Endpoints: []string{c.nodes[0].Addr}, CA: c.pki.CA.CertPEM, Crt: pair.CertPEM, Key: pair.KeyPEM},
		"other": {Endpoints: []string{"10.0.0.1"}, CA: c.pki.CA.CertPEM, Crt: other.CertPEM, Key: other.KeyPEM},
	}}

	if err := cfg.Save(c.config); err != nil {
		t.Fatal(err)
	}

	return cfg
}

func TestNodeCommandsThroughApid(t *testing.T) {
	c := newTestCluster(t, nil)
	c.writeConfig(t, role.Operator)

	now := time.Now()
	a, b := c.nodes[0].IP, c.nodes[1].IP
	dead := c.pki.DeadNode(t, "127.0.0.50")
	cli := func(args ...string) (string, string, error) {
		return runCLI(t, now, append([]string{"--aegisconfig", c.config}, args...)...)
	}

	t.Run("fan-out with a failed node", func(t *testing.T) {
		out, _, err := cli("-n", a+","+b, "-n", dead, "memory")
		if err == nil || err.Error() != "1 of 3 nodes failed: "+dead {
			t.Fatalf("err = %v", err)
		}

		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "NODE ") ||
			!strings.HasPrefix(lines[1], a+" ") || !strings.HasPrefix(lines[2], b+" ") || !strings.Contains(lines[1], "8192") ||
			!strings.HasPrefix(lines[3], dead+" ") ||
			!strings.HasSuffix(lines[3], "   error: unreachable (apid could not connect to the node)") || strings.Contains(out, "dial") {
			t.Fatalf("memory output:\n%s", out)
		}
	})

	t.Run("own node has no NODE column", func(t *testing.T) {
		out, _, err := cli("memory")
		if err != nil || !strings.HasPrefix(out, "TOTAL ") || strings.Count(out, "\n") != 2 {
			t.Fatalf("memory: %v\n%s", err, out)
		}
	})

	t.Run("json of the fan-out", func(t *testing.T) {
		out, _, err := cli("-n", a, "-n", dead, "-o", "json", "hostname")
		if err == nil || !strings.Contains(out, `"hostname": "`+a+`"`) || !strings.Contains(out, `"code": 14`) {
			t.Fatalf("json: %v\n%s", err, out)
		}
	})

	t.Run("operator restarts a service", func(t *testing.T) {
		out, _, err := cli("-n", b, "service", "trustd", "restart")
		if err != nil || !strings.HasPrefix(out, "NODE ") || !strings.Contains(out, b+"   Service \"trustd\" restarted") {
			t.Fatalf("restart: %v\n%s", err, out)
		}
	})

	t.Run("logs of several nodes, line by line", func(t *testing.T) {
		out, _, err := cli("-n", a+","+b, "logs", "apid", "--tail", "2")
		if err != nil || strings.Count(out, "\n") != 4 || !strings.Contains(out, b+": "+b+" apid line 5\n") {
			t.Fatalf("logs: %v\n%s", err, out)
		}
	})

	t.Run("version of client and node", func(t *testing.T) {
		out, _, err := cli("version")
		if err != nil || !strings.HasPrefix(out, "Client:\n") || !strings.Contains(out, "Server:\n\tTag:         "+apidtest.VersionTag) {
			t.Fatalf("version: %v\n%s", err, out)
		}
	})

	t.Run("unreachable endpoint is named", func(t *testing.T) {
		_, _, err := cli("-e", dead+":1", "hostname")
		if err == nil || err.Error() != "cannot reach endpoint "+dead+":1: dial tcp "+dead+":1: connect: connection refused" {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("health", func(t *testing.T) {
		out, progress, err := cli("-n", a+","+b, "health", "--wait-timeout", "30s")
		if err != nil || !strings.HasPrefix(out, "2 nodes healthy") || !strings.Contains(progress, b+": healthy") {
			t.Fatalf("health: %v\n%s%s", err, out, progress)
		}

		if out, _, err = cli("health"); err != nil || !strings.HasPrefix(out, "1 node healthy") {
			t.Fatalf("health of the endpoint's node: %v\n%s", err, out)
		}

		// The rounds wait on the command's clock; it moves on as soon as they do.
		clk := clock.NewFake(now)
		stop := advanceOnWait(clk, time.Second)
		_, progress, err = runCLIClock(t, clk, "--aegisconfig", c.config, "health", "--control-plane-nodes", a, "--worker-nodes", dead, "--wait-timeout", "1s")
		stop()
		if err == nil || !strings.Contains(err.Error(), "not healthy after 1s: "+dead) ||
			!strings.Contains(err.Error(), dead+": not answering: unreachable (apid could not connect to the node)") ||
			!strings.Contains(progress, dead+": waiting: not answering") {
			t.Fatalf("health with a dead node: %v\n%s", err, progress)
		}
	})

	t.Run("unknown service action", func(t *testing.T) {
		if _, _, err := cli("service", "apid", "reload"); err == nil || !strings.Contains(err.Error(), `unknown service action "reload"`) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestPermissionDeniedNamesMethodAndRoles(t *testing.T) {
	c := newTestCluster(t, nil)
	c.writeConfig(t, role.Reader)

	if _, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "services"); err != nil {
		t.Fatalf("a reader reads: %v", err)
	}

	_, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "service", "apid", "restart")

	want := `permission denied: /machine.MachineService/ServiceRestart needs one of os:admin, os:operator; caller has os:reader (context "main")`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
}

func TestClientCertificateCheckedBeforeDialing(t *testing.T) {
	c := newTestCluster(t, nil)
	cfg := c.writeConfig(t, role.Operator)
	cert, _ := ca.ParseCertificate(cfg.Contexts["main"].Crt)

	tests := []struct {
		name string
		now  time.Time
		want []string
	}{
		{
			name: "expired", now: cert.NotAfter.Add(2 * time.Hour),
			want: []string{
				`context "main": client certificate expired at ` + cert.NotAfter.UTC().Format(time.RFC3339) + " (2h0m0s ago)",
				"config new NEW-FILE --roles os:operator", "--aegisconfig " + c.config + " config merge NEW-FILE --force",
			},
		},
		{
			name: "not yet valid", now: cert.NotBefore.Add(-time.Hour),
			want: []string{"not valid until " + cert.NotBefore.UTC().Format(time.RFC3339), "clock"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The endpoint does not exist: had the command dialed, it would
			// say it cannot reach it.
			_, _, err := runCLI(t, tt.now, "--aegisconfig", c.config, "-e", "127.0.0.1:1", "memory")
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestAutomaticRenewal(t *testing.T) {
	c := newTestCluster(t, func(p *apidtest.PKI) certapi.Authority { return caAuthority{pki: p} })
	before := c.writeConfig(t, role.Operator, role.Reader)
	old, _ := ca.ParseCertificate(before.Contexts["main"].Crt)

	// A fresh certificate is left alone.
	if _, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "hostname"); err != nil {
		t.Fatal(err)
	}

	if after, _ := certs.LoadClientConfig(c.config); !bytes.Equal(after.Contexts["main"].Crt, before.Contexts["main"].Crt) {
		t.Fatal("a fresh certificate was renewed")
	}

	// With less than a third of its hour left, it is renewed before the
	// command runs, and the command runs.
	due := old.NotAfter.Add(-15 * time.Minute)

	out, stderr, err := runCLI(t, due, "--aegisconfig", c.config, "hostname")
	if err != nil || strings.TrimSpace(out) != c.nodes[0].Backend.Name() || stderr != "" {
		t.Fatalf("hostname after renewal: %v\n%s%s", err, out, stderr)
	}

	after, err := certs.LoadClientConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}

	renewed, err := ca.ParseCertificate(after.Contexts["main"].Crt)
	if err != nil {
		t.Fatal(err)
	}

	switch {
	case renewed.SerialNumber.Cmp(old.SerialNumber) == 0:
		t.Fatal("certificate not renewed")
	case !slices.Equal(slices.Sorted(slices.Values(renewed.Subject.Organization)), []string{"os:operator", "os:reader"}):
		t.Fatalf("renewed roles %q", renewed.Subject.Organization)
	case renewed.NotAfter.Sub(renewed.NotBefore) != old.NotAfter.Sub(old.NotBefore):
		t.Fatalf("renewed lifetime %s, want the old %s", renewed.NotAfter.Sub(renewed.NotBefore), old.NotAfter.Sub(old.NotBefore))
	case !bytes.Equal(mustMarshal(t, after.Contexts["other"]), mustMarshal(t, before.Contexts["other"])):
		t.Fatal("another context changed")
	}

	if _, err := tlsPair(after.Contexts["main"]); err != nil {
		t.Fatalf("the new key does not match the new certificate: %v", err)
	}

	assertMode(t, c.config, 0o600)
}

func TestFailedRenewalKeepsCredentials(t *testing.T) {
	c := newTestCluster(t, func(*apidtest.PKI) certapi.Authority { return caAuthority{err: certapi.ErrNoCA} })
	cfg := c.writeConfig(t, role.Operator)
	cert, _ := ca.ParseCertificate(cfg.Contexts["main"].Crt)

	before, err := os.ReadFile(c.config)
	if err != nil {
		t.Fatal(err)
	}

	out, stderr, err := runCLI(t, cert.NotAfter.Add(-time.Minute), "--aegisconfig", c.config, "hostname")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("the command must run on the old certificate: %v", err)
	}

	if !strings.Contains(stderr, `warning: could not renew the client certificate of context "main"`) || !strings.Contains(stderr, "control-plane") {
		t.Fatalf("stderr: %s", stderr)
	}

	if after, _ := os.ReadFile(c.config); !bytes.Equal(after, before) {
		t.Fatal("a failed renewal changed the client config")
	}

	if _, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "config", "renew"); err == nil || !strings.Contains(err.Error(), "use a control-plane endpoint") {
		t.Fatalf("config renew on a node without the CA: %v", err)
	}
}

func TestConfigRenewOnDemand(t *testing.T) {
	c := newTestCluster(t, func(p *apidtest.PKI) certapi.Authority { return caAuthority{pki: p} })
	before := c.writeConfig(t, role.Admin)

	out, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "--context", "main", "config", "renew")
	if err != nil || !strings.Contains(out, `renewed the client certificate of context "main": roles os:admin, valid until`) {
		t.Fatalf("config renew: %v\n%s", err, out)
	}

	after, _ := certs.LoadClientConfig(c.config)
	if bytes.Equal(after.Contexts["main"].Crt, before.Contexts["main"].Crt) {
		t.Fatal("certificate unchanged")
	}
}

func TestConfigNewRefusals(t *testing.T) {
	c := newTestCluster(t, nil)
	c.writeConfig(t, role.Admin)

	existing := filepath.Join(t.TempDir(), "taken")
	if err := os.WriteFile(existing, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "config", "new", existing); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("existing file: %v", err)
	}

	_, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "-n", c.nodes[0].IP+","+c.nodes[1].IP, "config", "new", filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(err.Error(), "asks one node; 2 are named") {
		t.Fatalf("two nodes: %v", err)
	}

	if _, _, err := runCLI(t, time.Now(), "--aegisconfig", c.config, "config", "new", "x", "--roles", "os:root"); err == nil || !strings.Contains(err.Error(), "unknown role") {
		t.Fatalf("bad role: %v", err)
	}
}

func mustMarshal(t *testing.T, ctx *certs.ClientContext) []byte {
	t.Helper()

	data, err := (&certs.ClientConfig{Context: "x", Contexts: map[string]*certs.ClientContext{"x": ctx}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}

	return data
}

func tlsPair(ctx *certs.ClientContext) (*certs.KeyPair, error) {
	return certs.NewKeyPair(ctx.Crt, ctx.Key)
}
