package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/token"
)

// checkApplyAcceptedCA adds a new CA to the worker's accepted CAs without a
// reboot: a client certificate of that CA, refused before, is served after,
// by the same apid process.
func checkApplyAcceptedCA(t *testing.T, e *applyEnv) {
	newCA := catest.NewCA(t, ca.Ed25519, time.Now())

	issued, keyPEM, err := catest.NewIssuer(t, newCA, time.Now()).IssueNewKey(ca.KeyRequest{
		CommonName: "rotated", Profile: ca.ProfileClient, Roles: role.NewSet(role.Reader),
	})
	if err != nil {
		t.Fatal(err)
	}

	// A new client for each call: a refused handshake would leave one
	// client's connection in gRPC's reconnect backoff, which would be
	// measured instead of the node.
	version := func() error {
		_, err := workerClient(t, e, issued.PEM, keyPEM).Version(e.ctx(t))

		return err
	}

	if err := version(); err == nil {
		t.Fatal("a certificate of a CA not yet accepted was served")
	}

	apid := servicePIDOn(t, e.talos, e.worker.Address)
	data := e.edited(t, func(c *certs.MachineConfig) {
		c.Machine.AcceptedCAs = append(c.Machine.AcceptedCAs, certs.CertAndKey{Crt: newCA.CertPEM})
	})

	start := time.Now()

	if _, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_AUTO}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(timeout)

	for {
		err := version()
		if err == nil {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("the new CA never accepted: %v", err)
		}

		time.Sleep(5 * time.Millisecond)
	}

	t.Logf("FIGURE accepted CAs: ApplyConfiguration call to the first call served with the new CA: %s", time.Since(start).Round(time.Millisecond))

	if got := servicePIDOn(t, e.talos, e.worker.Address); got != apid {
		t.Errorf("apid restarted: pid %d, was %d", got, apid)
	}
}

// checkApplyAutoReboots applies a reboot-only field with mode auto: the
// node reboots (machined stays) and its apid serves metrics.
func checkApplyAutoReboots(t *testing.T, e *applyEnv) {
	data := e.edited(t, func(c *certs.MachineConfig) { c.Machine.Metrics = certs.MetricsSpec{Enabled: true} })

	m, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_AUTO})
	if err != nil {
		t.Fatal(err)
	}

	if m.GetMode() != machine.ApplyConfigurationRequest_REBOOT || !strings.Contains(m.GetModeDetails(), "machine.metrics") {
		t.Fatalf("mode %s: %s", m.GetMode(), m.GetModeDetails())
	}

	url := "http://" + net.JoinHostPort(e.worker.Address, strconv.Itoa(certs.DefaultAPIDMetricsPort)) + "/metrics"

	waitUntil(t, "the worker's apid serves metrics after the reboot", func() bool {
		resp, err := http.Get(url) //nolint:noctx // bounded by the client's default transport and waitUntil
		if err != nil {
			return false
		}
		defer resp.Body.Close()

		return resp.StatusCode == http.StatusOK
	})
}

// workerClient is a Talos machinery client straight to the worker's apid
// with the given credentials.
func workerClient(t *testing.T, e *applyEnv, crt, key []byte) *client.Client {
	t.Helper()

	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}

	admin := contextOf(t, e.admin())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(admin.CA)

	cl, err := client.New(testContext(t), client.WithEndpoints(e.worker.Address),
		client.WithTLSConfig(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cl.Close() }) //nolint:errcheck // the test is done

	return cl
}

// checkApplyToken changes the static token of the control plane without a
// reboot: trustd signs for the new token at once and refuses the old one.
func checkApplyToken(t *testing.T, e *applyEnv) {
	cp := e.Nodes[0]

	old, err := certs.LoadMachineConfig(e.ConfigPath(cp), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	fresh, err := token.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	updated := *old
	updated.Machine.Token = fresh.Reveal()

	data, err := updated.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	ctx := client.WithNode(e.ctx(t), cp.Address)

	start := time.Now()

	if _, err := e.talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT}); err != nil {
		t.Fatal(err)
	}

	withNew, err := certs.ParseMachineConfig("new", data, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	const source = "127.6.8.13"

	deadline := time.Now().Add(timeout)

	for {
		_, err := joinAs(t, e.cliCluster, withNew, source, source)
		if err == nil {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("the new token never accepted: %v", err)
		}

		// Slower than the other polls: failed joins count against the
		// source's rate limit.
		time.Sleep(50 * time.Millisecond)
	}

	t.Logf("FIGURE static token: ApplyConfiguration call to the first join with the new token: %s", time.Since(start).Round(time.Millisecond))

	if _, err := joinAs(t, e.cliCluster, old, source, source); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the old token: %v, want Unauthenticated", err)
	}
}
