package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/node"
)

const metricsCIDR = "127.6.6.0/28"

// endpoint is one daemon's metrics endpoint on a node.
type endpoint struct {
	name, addr string
}

func (e endpoint) scrape(t *testing.T) metricstest.Families {
	t.Helper()

	var fams metricstest.Families

	waitFor(t, "a scrape of "+e.name, func() error {
		var err error
		fams, _, err = metricstest.Scrape(ctx(t), e.addr)

		return err
	})

	return fams
}

// TestOperability runs one real cluster (a control plane and a worker)
// with machine.metrics on, for the metrics and for the audit of forwarded
// calls.
//
// Metrics: every daemon serves /metrics on the node address, and the
// series move with the calls a client makes: gRPC counts by method and
// code on apid and machined (also on the node a call is forwarded to),
// trustd's refusals by reason, apid's open streams; the certificates,
// services, time gate and connection caps are there.
func TestOperability(t *testing.T) {
	needBinaries(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "metrics", ControlPlanes: 1, Workers: 1, CIDR: netip.MustParsePrefix(metricsCIDR),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: waitTimeout, Metrics: true,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	cp, w := c.Nodes[0].Address, c.Nodes[1].Address
	at := func(name, host string, port int) endpoint {
		return endpoint{name: name + " on " + host, addr: net.JoinHostPort(host, strconv.Itoa(port))}
	}
	machinedCP, apidCP, trustdCP := at("machined", cp, certs.DefaultMachinedMetricsPort), at("apid", cp, certs.DefaultAPIDMetricsPort), at("trustd", cp, certs.DefaultTrustdMetricsPort)
	machinedW, apidW := at("machined", w, certs.DefaultMachinedMetricsPort), at("apid", w, certs.DefaultAPIDMetricsPort)

	version := []string{"grpc_method", "Version", "grpc_code", "OK"}
	before := map[string]float64{}

	for _, e := range []endpoint{machinedCP, apidCP, machinedW, apidW} {
		v, _ := e.scrape(t).Value("grpc_server_handled_total", version...)
		before[e.name] = v
	}

	trustdBefore := trustdCP.scrape(t)

	admin := talosClient(t, c.ClientConfigPath())

	if _, err := admin.Version(client.WithNode(ctx(t), cp)); err != nil {
		t.Fatal(err)
	}

	if _, err := admin.Version(client.WithNode(ctx(t), w)); err != nil {
		t.Fatal(err)
	}

	// Two calls through the control plane's apid, one served by each node.
	for e, delta := range map[endpoint]float64{apidCP: 2, machinedCP: 1, apidW: 1, machinedW: 1} {
		if got := e.scrape(t).Must(t, "grpc_server_handled_total", version...); got != before[e.name]+delta {
			t.Errorf("%s: Version OK %v, want %v", e.name, got, before[e.name]+delta)
		}
	}

	refuseToken(t, c)

	trustdAfter := trustdCP.scrape(t)
	for _, s := range []struct {
		name   string
		labels []string
	}{
		{metrics.TrustdRefused, []string{metrics.LabelReason, "invalid_token"}},
		{metrics.TrustdDecisions, []string{metrics.LabelTokenKind, "none", metrics.LabelOutcome, "invalid_token"}},
		{"grpc_server_handled_total", []string{"grpc_method", "Certificate", "grpc_code", "Unauthenticated"}},
	} {
		was, _ := trustdBefore.Value(s.name, s.labels...)
		if got := trustdAfter.Must(t, s.name, s.labels...); got != was+1 {
			t.Errorf("trustd %s%v = %v, want %v", s.name, s.labels, got, was+1)
		}
	}

	// The worker joined through trustd; the gate is open (trusted host clock).
	for name, check := range map[string]func(float64) bool{
		metrics.TrustdIssued:      func(v float64) bool { return v >= 1 },
		metrics.TrustdTimeSynced:  func(v float64) bool { return v == 1 },
		metrics.TrustdTokens:      func(v float64) bool { return v >= 0 },
		metrics.TrustdTokensLimit: func(v float64) bool { return v > 0 },
	} {
		if v := trustdAfter.Must(t, name); !check(v) {
			t.Errorf("trustd %s = %v", name, v)
		}
	}

	followStream(t, admin, apidCP)
	checkNodeSeries(t, machinedCP, apidCP, trustdCP)
	checkAlertSeries(t, machinedCP, apidCP, trustdCP)
	reportScrapes(t, c, machinedCP, apidCP, trustdCP)

	forwardedAudit(t, c, admin)
}

// forwardedAudit: a credential call the control plane forwards to the
// worker is audited by the worker's machined, and logged by its apid,
// under the admin's certificate, with the control plane in forwarded_by.
func forwardedAudit(t *testing.T, c *localcluster.Cluster, admin *client.Client) {
	t.Helper()

	cfg, err := clientconfig.Open(c.ClientConfigPath())
	if err != nil {
		t.Fatal(err)
	}

	crtPEM, err := base64.StdEncoding.DecodeString(cfg.Contexts[cfg.Context].Crt)
	if err != nil {
		t.Fatal(err)
	}

	adminCert, err := ca.ParseCertificate(crtPEM)
	if err != nil {
		t.Fatal(err)
	}

	worker := c.Nodes[1]

	// Workers hand out no client configuration: refused, and audited so.
	_, err = admin.GenerateClientConfiguration(client.WithNode(ctx(t), worker.Address), &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("GenerateClientConfiguration on the worker: %v", err)
	}

	serial, subject := adminCert.SerialNumber.Text(16), adminCert.Subject.String()

	for _, f := range []struct {
		what, path, msg, serialKey, subjectKey string
	}{
		{"worker's machined", c.LogPath(worker), node.MsgCredentialRefused, node.AuditCallerSerial, node.AuditCallerSubject},
		{"worker's apid", filepath.Join(c.StatePath(worker), "logs", "apid.log"), "finished call", logkey.CallerSerial, logkey.CallerSubject},
	} {
		var rec map[string]any

		waitFor(t, "the "+f.what+" record", func() error {
			rec = findRecord(f.path, f.msg, logkey.Method, "GenerateClientConfiguration", node.AuditMethod, machine.MachineService_GenerateClientConfiguration_FullMethodName)
			if rec == nil {
				return fmt.Errorf("no %q record in %s", f.msg, f.path)
			}

			return nil
		})

		if rec[f.serialKey] != serial || rec[f.subjectKey] != subject {
			t.Errorf("%s names %v / %v, want the admin's %s / %s", f.what, rec[f.serialKey], rec[f.subjectKey], serial, subject)
		}

		if via, _ := rec[logkey.ForwardedBy].(string); !strings.Contains(via, "os:impersonator") {
			t.Errorf("%s: forwarded_by = %q, want the control plane's impersonator certificate", f.what, via)
		}
	}
}

// findRecord returns the first JSON record of the log at path with message
// msg that has either of the two field/value pairs given.
func findRecord(path, msg string, k1, v1, k2, v2 string) map[string]any {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}

	for line := range strings.SplitSeq(string(data), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}

		if rec[k1] == v1 || rec[k2] == v2 {
			return rec
		}
	}

	return nil
}

// refuseToken calls trustd with a token that does not exist.
func refuseToken(t *testing.T, c *localcluster.Cluster) {
	t.Helper()

	cfg, err := clientconfig.Open(c.ClientConfigPath())
	if err != nil {
		t.Fatal(err)
	}

	caPEM, err := base64.StdEncoding.DecodeString(cfg.Contexts[cfg.Context].CA)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	host := c.Nodes[0].Address

	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(wire.TrustdPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}

	defer conn.Close()

	callCtx := metadata.AppendToOutgoingContext(ctx(t), "token", "zzzzzz.0123456789abcdef")

	_, err = securityapi.NewSecurityServiceClient(conn).Certificate(callCtx, &securityapi.CertificateRequest{Csr: []byte("x")})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Certificate with an unknown token: %v", err)
	}
}

// followStream holds an Events follow open and watches apid's open streams
// go up, then down once it ends.
func followStream(t *testing.T, admin *client.Client, apid endpoint) {
	t.Helper()

	streamCtx, cancel := context.WithCancel(ctx(t))
	defer cancel()

	stream, err := admin.MachineClient.Events(streamCtx, &machine.EventsRequest{TailEvents: 1})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	open := func() float64 { return apid.scrape(t).Must(t, metrics.StreamsOpen) }

	waitUntil(t, "an open stream counted", func() bool { return open() >= 1 })
	cancel()
	waitUntil(t, "the stream released", func() bool { return open() == 0 })
}

// checkNodeSeries checks the series that describe the node rather than
// count calls.
func checkNodeSeries(t *testing.T, machined, apid, trustd endpoint) {
	t.Helper()

	now := float64(time.Now().Unix())

	for _, e := range []endpoint{machined, apid, trustd} {
		fams := e.scrape(t)

		for _, cert := range []string{"server", "accepted_ca"} {
			if v := fams.Must(t, metrics.CertificateNotAfter, metrics.LabelCertificate, cert); v < now {
				t.Errorf("%s: %s certificate NotAfter %v is past", e.name, cert, v)
			}
		}

		if v := fams.Must(t, "go_goroutines"); v <= 0 {
			t.Errorf("%s: go_goroutines = %v", e.name, v)
		}

		// Plain /metrics only: no pprof, no index.
		resp, err := http.Get("http://" + e.addr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}

		resp.Body.Close()

		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s serves /debug/pprof/: %s", e.name, resp.Status)
		}
	}

	m := machined.scrape(t)
	for _, cert := range []string{"impersonator", "etcd_server", "etcd_peer", "etcd_client", "etcd_ca"} {
		if v := m.Must(t, metrics.CertificateNotAfter, metrics.LabelCertificate, cert); v < now {
			t.Errorf("machined: %s certificate NotAfter %v is past", cert, v)
		}
	}

	if v := m.Must(t, metrics.MachinedCallsLimit); v != machineapi.MaxCalls || m.Must(t, metrics.MachinedCallsOpen) > v {
		t.Errorf("machined: calls limit %v, open %v", v, m.Must(t, metrics.MachinedCallsOpen))
	}

	for _, svc := range []string{"apid", "trustd"} {
		if v := m.Must(t, metrics.ServiceUp, metrics.LabelService, svc); v != 1 {
			t.Errorf("machined: %s up = %v", svc, v)
		}

		if v := m.Must(t, metrics.ServiceState, metrics.LabelService, svc, metrics.LabelState, "Running"); v != 1 {
			t.Errorf("machined: %s Running = %v", svc, v)
		}

		m.Must(t, metrics.ServiceRestarts, metrics.LabelService, svc)
	}

	for _, e := range []endpoint{apid, trustd} {
		fams := e.scrape(t)
		if open := fams.Must(t, metrics.ConnectionsOpen); open < 0 || open > fams.Must(t, metrics.ConnectionsLimit, metrics.LabelScope, "total") {
			t.Errorf("%s: %v connections open", e.name, open)
		}
	}
}

// checkAlertSeries checks the series an operator alerts on, as a healthy
// control plane of one member reports them: its build, the time left of
// its certificates, its etcd member leading, its clock synced, and the
// refusal and issuance counters there from the start.
func checkAlertSeries(t *testing.T, machined, apid, trustd endpoint) {
	t.Helper()

	for _, e := range []endpoint{machined, apid, trustd} {
		fams := e.scrape(t)
		if v := fams.Must(t, metrics.BuildInfo); v != 1 {
			t.Errorf("%s: %s = %v", e.name, metrics.BuildInfo, v)
		}

		if v := fams.Must(t, metrics.CertificateExpiry, metrics.LabelCertificate, "server"); v <= 0 {
			t.Errorf("%s: server certificate expires in %v s", e.name, v)
		}
	}

	m := machined.scrape(t)
	for name, want := range map[string]float64{
		metrics.EtcdUp: 1, metrics.EtcdHasLeader: 1, metrics.EtcdIsLeader: 1, metrics.TimeSynced: 1,
	} {
		if v := m.Must(t, name); v != want {
			t.Errorf("machined: %s = %v, want %v", name, v, want)
		}
	}

	if v := m.Must(t, metrics.EtcdDBSize); v <= 0 {
		t.Errorf("machined: %s = %v", metrics.EtcdDBSize, v)
	}

	m.Must(t, metrics.ClientCertificates, metrics.LabelOperation, metrics.OperationRenew, metrics.LabelOutcome, metrics.OutcomeIssued)
	apid.scrape(t).Must(t, metrics.HandshakesRefused, metrics.LabelListener, "apid", metrics.LabelReason, "revoked")
	trustd.scrape(t).Must(t, metrics.TrustdDecisions, metrics.LabelTokenKind, "stored", metrics.LabelOutcome, metrics.OutcomeIssued)
}

// reportScrapes logs each daemon's scrape size, series count and resident
// memory, for the record.
func reportScrapes(t *testing.T, c *localcluster.Cluster, endpoints ...endpoint) {
	t.Helper()

	for _, e := range endpoints {
		fams, size, err := metricstest.Scrape(ctx(t), e.addr)
		if err != nil {
			t.Fatal(err)
		}

		series := 0
		for _, f := range fams {
			series += len(f.GetMetric())
		}

		t.Logf("%s: %d bytes, %d families, %d series, resident %s", e.name, size, len(fams), series, residentOf(c, e.name))
	}
}

// residentOf is VmRSS of the daemon behind an endpoint name ("apid on
// HOST"), found by its API listen address.
func residentOf(c *localcluster.Cluster, name string) string {
	binary, host, _ := strings.Cut(name, " on ")

	var pids []int

	switch binary {
	case "machined":
		pids = []int{c.Nodes[0].PID}
	case "apid":
		pids = pidsOf(filepath.Join(binDir, binary), net.JoinHostPort(host, strconv.Itoa(wire.APIDPort)))
	default:
		pids = pidsOf(filepath.Join(binDir, binary), net.JoinHostPort(host, strconv.Itoa(wire.TrustdPort)))
	}

	if len(pids) != 1 {
		return fmt.Sprintf("unknown (%d processes)", len(pids))
	}

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	if err != nil {
		return err.Error()
	}

	for line := range strings.SplitSeq(string(status), "\n") {
		if rss, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(rss)
		}
	}

	return "unknown"
}
