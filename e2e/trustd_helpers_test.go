package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/layout"
)

// waitTimeout bounds every wait of these tests; generous, for a busy machine.
const waitTimeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)

	return ctx
}

// trustdNode is a control plane's config and state directory on disk.
type trustdNode struct {
	ip     string
	listen string
	config string
	state  string
	cfg    *certs.MachineConfig
}

// newNode writes a control-plane config for a new cluster whose node listens
// on ip and syncs its time with ntpServers, or trusts the host clock when
// none is given.
func newNode(t *testing.T, ip string, ntpServers ...string) *trustdNode {
	t.Helper()

	dir := t.TempDir()

	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.GenerateMachineConfig(b, certs.NodeControlPlane, certs.ConfigOptions{
		ClusterName: "e2e", Endpoint: ip, TimeServers: ntpServers, TrustHostClock: len(ntpServers) == 0,
		Hostname: "cp-1", ListenAddress: ip,
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	n := &trustdNode{
		ip:     ip,
		listen: net.JoinHostPort(ip, strconv.Itoa(freePort(t, "tcp", ip))),
		config: filepath.Join(dir, "controlplane.yaml"),
		state:  filepath.Join(dir, "state"),
		cfg:    cfg,
	}

	n.save(t)

	return n
}

// save writes the node's config again, after a test changed it.
func (n *trustdNode) save(t *testing.T) {
	t.Helper()

	if err := n.cfg.Save(n.config, true); err != nil {
		t.Fatal(err)
	}
}

// trustdProc is a running cmd/trustd.
type trustdProc struct {
	cmd  *exec.Cmd
	logs *logtest.Sink
	done chan error
	once sync.Once
	err  error
}

// start runs trustd for the node and waits until it listens. It is stopped
// when the test ends, and its log is shown if the test failed.
func (n *trustdNode) start(t *testing.T) *trustdProc {
	t.Helper()

	p := &trustdProc{logs: &logtest.Sink{}, done: make(chan error, 1)}
	p.cmd = exec.Command(filepath.Join(binDir, "trustd"), "--config", n.config, "--state", n.state, "--listen", n.listen)
	p.cmd.Stderr = p.logs

	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}

	go func() { p.done <- p.cmd.Wait() }()

	t.Cleanup(func() {
		p.stop()

		if t.Failed() {
			t.Logf("trustd log:\n%s", p.logs.String())
		}
	})

	deadline := time.After(waitTimeout)

	for !hasRecord(p.logs, "trustd serving") {
		select {
		case err := <-p.done:
			t.Fatalf("trustd exited: %v\n%s", err, p.logs.String())
		case <-deadline:
			t.Fatal("trustd did not start")
		case <-time.After(20 * time.Millisecond):
		}
	}

	return p
}

// stop sends SIGTERM and waits; it returns the exit error (nil for a clean
// stop). Calling it again returns the same.
func (p *trustdProc) stop() error {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)

		select {
		case p.err = <-p.done:
		case <-time.After(waitTimeout):
			_ = p.cmd.Process.Kill()
			p.err = <-p.done
		}
	})

	return p.err
}

// audit returns the audit records of certificate decisions so far.
func (p *trustdProc) audit() []map[string]any {
	var out []map[string]any

	for _, m := range p.logs.JSONRecords() {
		if m["log"] == "audit" && (m["msg"] == "certificate issued" || m["msg"] == "certificate refused") {
			out = append(out, m)
		}
	}

	return out
}

// hasRecord reports whether a process's log holds a record with message msg.
func hasRecord(logs *logtest.Sink, msg string) bool {
	return slices.ContainsFunc(logs.JSONRecords(), func(m map[string]any) bool { return m["msg"] == msg })
}

// conn dials trustd over TLS verifying its certificate against the node's
// CAs, from the source address given (127.0.1.0/24), so tests can act as
// distinct callers.
func (n *trustdNode) conn(t *testing.T, source string) *grpc.ClientConn {
	t.Helper()

	creds := credentials.NewTLS(&tls.Config{RootCAs: n.cfg.AcceptedCAs().Pool(), ServerName: n.ip, MinVersion: tls.VersionTLS13})
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}

	c, err := grpc.NewClient(n.listen, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() })

	return c
}

// security is the Talos machinery client of trustd.
func (n *trustdNode) security(t *testing.T, source string) securityapi.SecurityServiceClient {
	t.Helper()

	return securityapi.NewSecurityServiceClient(n.conn(t, source))
}

// waitServing waits until trustd's health says SERVING (its time is synced).
func (n *trustdNode) waitServing(t *testing.T) {
	t.Helper()

	n.waitHealth(t, "127.0.1.250", healthpb.HealthCheckResponse_SERVING)
}

// waitHealth waits until trustd's health, asked from source, is want.
func (n *trustdNode) waitHealth(t *testing.T, source string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()

	ctx := testContext(t)
	hc := healthpb.NewHealthClient(n.conn(t, source))

	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == want {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("trustd never became %s: %v %v", want, resp, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tokens is a TokenService client on the node's Unix socket.
func (n *trustdNode) tokens(t *testing.T) tokens.TokenServiceClient {
	t.Helper()

	sock := layout.Layout{State: n.state}.TokensSocket()
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token socket %s has mode %v", sock, st.Mode())
	}

	c, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() })

	return tokens.NewTokenServiceClient(c)
}

// auditTrail reads trustd's audit files under the node's state, oldest
// records first: the issuance records of audit.log (and its rotated
// files) and the refusals and their summaries of refusals.log.
func (n *trustdNode) auditTrail(t *testing.T) (issued, refused []map[string]any) {
	t.Helper()

	return readLogFiles(t, filepath.Join(n.state, "trustd", "audit.log")),
		readLogFiles(t, filepath.Join(n.state, "trustd", "refusals.log"))
}

// readLogFiles reads the JSON records of a log rotated to path.1, path.2 …,
// oldest first; files that do not exist are skipped.
func readLogFiles(t *testing.T, path string) []map[string]any {
	t.Helper()

	files, _ := filepath.Glob(path + ".*")
	slices.SortFunc(files, func(a, b string) int {
		ia, _ := strconv.Atoi(a[len(path)+1:])
		ib, _ := strconv.Atoi(b[len(path)+1:])

		return ib - ia
	})

	var out []map[string]any

	for _, f := range append(files, path) {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}

		if err != nil {
			t.Fatal(err)
		}

		sink := &logtest.Sink{}
		_, _ = sink.Write(b)
		out = append(out, sink.Records(t)...)
	}

	return out
}

// accounted counts the decisions audit records account for: issuance
// records, refusals written in full, and the refusals summaries count.
func accounted(recs []map[string]any) (issued, refused int) {
	for _, r := range recs {
		switch {
		case r["msg"] == "certificate refusals":
			n, _ := r["count"].(float64)
			refused += int(n)
		case r["decision"] == "issued":
			issued++
		case r["decision"] == "refused":
			refused++
		}
	}

	return issued, refused
}
