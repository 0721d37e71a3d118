package trustdclient_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/h2ping"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// fakeTrustd serves the two node-facing services of trustd over TLS and
// counts the connections it accepts, the client certificates it sees and
// the PINGs its clients send.
type fakeTrustd struct {
	revocations.UnimplementedNodeRevocationServiceServer
	membership.UnimplementedMembershipServiceServer

	addr  string
	srv   *grpc.Server
	pings h2ping.Counter

	mu      sync.Mutex
	dials   int
	serials []string // the client certificate's serial at each handshake
	// hold, when set, keeps each heartbeat waiting until it is closed;
	// held is told each time one waits.
	hold, held chan struct{}
	// delay, when set, holds back the server's side of each handshake
	// this long: a control plane too busy to answer at once.
	delay time.Duration
	// refuse, when set, has each heartbeat refused as Unavailable: a
	// control plane whose etcd cannot take it for now.
	refuse atomic.Bool
	// holdFor, when set, is the hold each heartbeat's answer gives; beats
	// counts the heartbeats; accepted are the connections accepted.
	holdFor  atomic.Int64
	beats    atomic.Int64
	accepted []net.Conn
}

// dropConns closes, on the server's side, every connection f accepted.
func (f *fakeTrustd) dropConns() {
	f.mu.Lock()
	defer f.mu.Unlock()

	for _, c := range f.accepted {
		_ = c.Close()
	}

	f.accepted = nil
}

func (f *fakeTrustd) Serials(context.Context, *revocations.SerialsRequest) (*revocations.SerialsResponse, error) {
	return &revocations.SerialsResponse{}, nil
}

func (f *fakeTrustd) Heartbeat(ctx context.Context, _ *membership.HeartbeatRequest) (*membership.HeartbeatResponse, error) {
	if f.refuse.Load() {
		return nil, status.Error(codes.Unavailable, "membership: etcd unavailable")
	}

	if f.hold != nil {
		f.held <- struct{}{}

		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	f.beats.Add(1)

	resp := &membership.HeartbeatResponse{}
	if d := time.Duration(f.holdFor.Load()); d > 0 {
		resp.Hold = durationpb.New(d)
	}

	return resp, nil
}

// seen is how many connections f accepted and the certificates they
// presented.
func (f *fakeTrustd) seen() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()

	return f.dials, append([]string(nil), f.serials...)
}

// countingListener counts what it accepts.
type countingListener struct {
	net.Listener
	f *fakeTrustd
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.f.mu.Lock()
		l.f.dials++
		l.f.accepted = append(l.f.accepted, c)
		l.f.mu.Unlock()
	}

	if err == nil && l.f.delay > 0 {
		c = &slowConn{Conn: c, delay: l.f.delay}
	}

	return c, err
}

// slowConn holds back its first read (the server's side of the TLS
// handshake) for delay.
type slowConn struct {
	net.Conn
	delay time.Duration
	once  sync.Once
}

func (c *slowConn) Read(p []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.delay) })

	return c.Conn.Read(p)
}

func startTrustd(t *testing.T, authority *ca.CA) *fakeTrustd {
	t.Helper()

	return startTrustdAt(t, authority, "127.0.0.1:0", 0)
}

// startTrustdAt starts a fakeTrustd listening on addr whose handshakes
// wait delay.
func startTrustdAt(t *testing.T, authority *ca.CA, addr string, delay time.Duration) *fakeTrustd {
	t.Helper()

	pair := trustdtest.ServerKeyPair(t, authority, "127.0.0.1")
	f := &fakeTrustd{delay: delay}

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}

	f.addr = lis.Addr().String()
	f.srv = grpc.NewServer(grpc.Creds(f.pings.ServerCredentials(credentials.NewTLS(&tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: pair.GetCertificate,
		ClientAuth:     tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			f.mu.Lock()
			f.serials = append(f.serials, cs.PeerCertificates[0].SerialNumber.Text(16))
			f.mu.Unlock()

			return nil
		},
	}))))
	revocations.RegisterNodeRevocationServiceServer(f.srv, f)
	membership.RegisterMembershipServiceServer(f.srv, f)

	go func() { _ = f.srv.Serve(countingListener{lis, f}) }()

	t.Cleanup(f.srv.Stop)

	return f
}

// nodeCert is a node certificate that a test can renew.
type nodeCert struct {
	authority *ca.CA
	current   atomic.Pointer[tls.Certificate]
}

func newNodeCert(t *testing.T, authority *ca.CA) *nodeCert {
	t.Helper()

	n := &nodeCert{authority: authority}
	n.renew(t)

	return n
}

// renew issues a new node certificate and returns its serial.
func (n *nodeCert) renew(t *testing.T) string {
	t.Helper()

	crt, key := trustdtest.ServerCertificate(t, n.authority, "127.0.0.1")

	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}

	n.current.Store(&pair)

	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}

	return leaf.SerialNumber.Text(16)
}

func (n *nodeCert) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return n.current.Load(), nil
}

func newClient(t *testing.T, authority *ca.CA, cert *nodeCert, endpoints ...string) *trustdclient.Client {
	t.Helper()

	cas, err := ca.NewAcceptedSet(time.Now(), authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	c, err := trustdclient.New(trustdclient.Config{
		Endpoints: endpoints, Certificate: cert.get, AcceptedCAs: cas.Pool, Source: "127.0.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = c.Close() })

	return c
}

func testCA(t *testing.T) *ca.CA {
	t.Helper()

	authority, err := ca.Generate(ca.Config{CommonName: "trustdclient test CA"})
	if err != nil {
		t.Fatal(err)
	}

	return authority
}

func testContext(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	return ctx
}

// TestPollerAndHeartbeatsShareOneConnection polls the revocation list and
// sends heartbeats, twice each, through one Client: trustd sees one
// connection.
func TestPollerAndHeartbeatsShareOneConnection(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	trustd := startTrustd(t, authority)
	client := newClient(t, authority, newNodeCert(t, authority), trustd.addr)

	list, err := revocation.OpenList(revocation.ListConfig{})
	if err != nil {
		t.Fatal(err)
	}

	poller, err := revocation.NewPoller(revocation.PollerConfig{Trustd: client, List: list})
	if err != nil {
		t.Fatal(err)
	}

	sender := &membershippkg.Sender{Trustd: client}

	for range 2 {
		if !poller.PollOnce(ctx) {
			t.Fatal("the poll was not answered")
		}

		if err := sender.Send(ctx, &membershippkg.Member{Hostname: "worker-1"}); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}

	if dials, handshakes := trustd.seen(); dials != 1 || len(handshakes) != 1 {
		t.Fatalf("%d connections and %d handshakes for 2 polls and 2 heartbeats, want 1 and 1", dials, len(handshakes))
	}

	// The client's fixed flow-control windows: gRPC's bandwidth estimator
	// would have pinged trustd after the first answer and after each
	// answered ping, calls one after the other on a kept connection.
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}

	trustd.srv.GracefulStop()

	if got, err := trustd.pings.Pings(); got != 0 || err != nil {
		t.Fatalf("the client sent %d pings over 4 calls (frames read: %v)", got, err)
	}
}

// call asks once through c and reports which endpoint answered.
func call(ctx context.Context, c *trustdclient.Client) (string, error) {
	return c.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})

		return err
	})
}

// TestRenewedCertificateReplacesTheConnection renews the node certificate
// while a heartbeat is under way on the kept connection: the next call
// goes over a new connection that presents the renewed certificate (trustd
// refuses calls on one authenticated by a certificate of a dropped CA),
// the heartbeat under way still ends well, and later calls keep the new
// connection.
func TestRenewedCertificateReplacesTheConnection(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	trustd := startTrustd(t, authority)
	cert := newNodeCert(t, authority)
	client := newClient(t, authority, cert, trustd.addr)

	if _, err := call(ctx, client); err != nil {
		t.Fatal(err)
	}

	_, before := trustd.seen()

	trustd.hold, trustd.held = make(chan struct{}), make(chan struct{}, 1)
	beat := make(chan error, 1)

	go func() {
		beat <- (&membershippkg.Sender{Trustd: client}).Send(ctx, &membershippkg.Member{Hostname: "worker-1"})
	}()

	<-trustd.held

	renewed := cert.renew(t)

	for range 2 {
		if _, err := call(ctx, client); err != nil {
			t.Fatalf("after the renewal: %v", err)
		}
	}

	close(trustd.hold)

	if err := <-beat; err != nil {
		t.Fatalf("the heartbeat under way during the renewal: %v", err)
	}

	if dials, got := trustd.seen(); dials != 2 || len(got) != 2 || got[0] != before[0] || got[1] != renewed {
		t.Fatalf("%d connections presenting %v, want 2: the one before the renewal, %v, then the renewed one, %s", dials, got, before, renewed)
	}
}

// TestFailedEndpointRotates calls with the node's preferred endpoint down:
// the other answers, and the next call starts with it.
func TestFailedEndpointRotates(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	up := startTrustd(t, authority)

	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	downAddr := down.Addr().String()
	_ = down.Close()

	client := preferring(t, downAddr, trustdclient.Config{
		Endpoints: []string{downAddr, up.addr}, Certificate: newNodeCert(t, authority).get,
		AcceptedCAs: func() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(authority.Cert); return p },
		Source:      "127.0.0.1",
	})

	var tried []string

	for range 2 {
		ep, err := client.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			_, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})
			tried = append(tried, conn.(*grpc.ClientConn).Target())

			return err
		})
		if err != nil || ep != up.addr {
			t.Fatalf("answered by %q (%v), want %s", ep, err, up.addr)
		}
	}

	if want := []string{downAddr, up.addr, up.addr}; strings.Join(tried, " ") != strings.Join(want, " ") {
		t.Fatalf("tried %v, want %v", tried, want)
	}
}

// TestProbeOfAClosedPortSkipsIt: once its probe is due, the preferred
// endpoint, still down, is probed on a fresh connection that fails at
// once; the call is not made there, and the other endpoint answers.
func TestProbeOfAClosedPortSkipsIt(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	up := startTrustd(t, authority)

	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	downAddr := down.Addr().String()
	_ = down.Close()

	clk := clock.NewFake(time.Now())
	client := preferring(t, downAddr, trustdclient.Config{
		Endpoints: []string{downAddr, up.addr}, Certificate: newNodeCert(t, authority).get,
		AcceptedCAs: func() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(authority.Cert); return p },
		Source:      "127.0.0.1", Clock: clk,
	})

	var tried []string

	callOnce := func() {
		t.Helper()

		ep, err := client.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			tried = append(tried, conn.(*grpc.ClientConn).Target())
			_, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})

			return err
		})
		if err != nil || ep != up.addr {
			t.Fatalf("answered by %q (%v), want %s", ep, err, up.addr)
		}
	}

	callOnce()
	clk.Advance(2 * trustdclient.ProbeInterval)

	tried = nil
	start := time.Now()

	callOnce()

	if took := time.Since(start); took >= trustdclient.ProbeTimeout || strings.Join(tried, " ") != up.addr {
		t.Fatalf("a call with the probe of a closed port due tried %v in %v, want only %s, within %v",
			tried, took, up.addr, trustdclient.ProbeTimeout)
	}
}

// TestProbeWaitsForAHandshakeUnderWay: a control plane that connects but
// is slow to finish its handshake (busier than ProbeTimeout allows) is
// waited for, up to ProbeHandshakeTimeout, instead of being skipped with
// its handshake thrown away.
func TestProbeWaitsForAHandshakeUnderWay(t *testing.T) {
	t.Parallel()

	authority := testCA(t)
	p := failedOver(t, authority)
	slowAddr := p.failed

	// The control plane comes up, busy: its handshakes take longer than
	// ProbeTimeout. The probe waits for it, and the call is its.
	delay := trustdclient.ProbeTimeout + (trustdclient.ProbeHandshakeTimeout-trustdclient.ProbeTimeout)/3
	startTrustdAt(t, authority, slowAddr, delay)
	p.clk.Advance(trustdclient.MaxProbeInterval * 2)

	start := time.Now()

	if ep, err := p.serials(); err != nil || ep != slowAddr {
		t.Fatalf("with its probe due, the busy control plane did not answer: answered by %q (%v), want %s", ep, err, slowAddr)
	}

	if took := time.Since(start); took < delay {
		t.Fatalf("the call took %v, less than the handshake's delay %v", took, delay)
	}
}

// TestFailedProbeClosesItsConnection: a probe of a control plane that
// accepts the connection but never finishes the handshake gives up at
// ProbeHandshakeTimeout, and closes the connection rather than leave it
// half made.
func TestFailedProbeClosesItsConnection(t *testing.T) {
	t.Parallel()

	p := failedOver(t, testCA(t))
	silentAddr := p.failed

	// A listener that reads what comes and never answers: it learns when
	// the client closes.
	silent, err := net.Listen("tcp", silentAddr)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = silent.Close() })

	closed := make(chan time.Time, 1)

	go func() {
		c, err := silent.Accept()
		if err != nil {
			return
		}

		defer c.Close()

		_, _ = io.Copy(io.Discard, c)
		closed <- time.Now()
	}()

	p.clk.Advance(trustdclient.MaxProbeInterval * 2)

	start := time.Now()

	if ep, err := p.serials(); err != nil || ep != p.up {
		t.Fatalf("answered by %q (%v), want %s", ep, err, p.up)
	}

	if took := time.Since(start); took < trustdclient.ProbeHandshakeTimeout {
		t.Fatalf("the probe of a handshake under way gave up after %v, before ProbeHandshakeTimeout (%v)", took, trustdclient.ProbeHandshakeTimeout)
	}

	select {
	case at := <-closed:
		if at.Sub(start) > trustdclient.ProbeHandshakeTimeout+5*time.Second {
			t.Fatalf("the failed probe's connection was closed %v after the probe began", at.Sub(start))
		}
	case <-p.ctx.Done():
		t.Fatal("the failed probe's connection was never closed")
	}
}

// probing is a Client of two endpoints that failed over from the one it
// prefers, failed (a closed port, for the test to open), to up (a trustd).
type probing struct {
	ctx        context.Context
	clk        *clock.Fake
	client     *trustdclient.Client
	failed, up string
}

func failedOver(t *testing.T, authority *ca.CA) *probing {
	t.Helper()

	p := &probing{ctx: testContext(t), clk: clock.NewFake(time.Now()), failed: closedPort(t), up: startTrustd(t, authority).addr}
	p.client = preferring(t, p.failed, trustdclient.Config{
		Endpoints: []string{p.failed, p.up}, Certificate: newNodeCert(t, authority).get,
		AcceptedCAs: func() *x509.CertPool { pool := x509.NewCertPool(); pool.AddCert(authority.Cert); return pool },
		Source:      "127.0.0.1", Clock: p.clk,
	})

	// The port is closed: the call goes on to the other control plane.
	if ep, err := p.serials(); err != nil || ep != p.up {
		t.Fatalf("answered by %q (%v), want %s", ep, err, p.up)
	}

	return p
}

// serials asks for the revocation list's serials, and returns the
// endpoint that answered.
func (p *probing) serials() (string, error) {
	return p.client.Call(p.ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})

		return err
	})
}

// closedPort is a local address where nothing listens (for now).
func closedPort(t *testing.T) string {
	t.Helper()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	addr := lis.Addr().String()
	_ = lis.Close()

	return addr
}

// preferring is a Client of cfg whose identity makes it prefer endpoint.
func preferring(t *testing.T, endpoint string, cfg trustdclient.Config) *trustdclient.Client {
	t.Helper()

	for i := range 100 {
		cfg.Identity = fmt.Sprintf("worker-%d", i)

		c, err := trustdclient.New(cfg)
		if err != nil {
			t.Fatal(err)
		}

		if c.Preferred() == endpoint {
			t.Cleanup(func() { _ = c.Close() })

			return c
		}

		_ = c.Close()
	}

	t.Fatalf("no identity of 100 prefers %s", endpoint)

	return nil
}

// TestClosed: a closed Client refuses calls, and none reaches trustd.
func TestClosed(t *testing.T) {
	authority := testCA(t)
	trustd := startTrustd(t, authority)
	client := newClient(t, authority, newNodeCert(t, authority), trustd.addr)

	if err := client.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := call(testContext(t), client); !errors.Is(err, trustdclient.ErrClosed) {
		t.Fatalf("call on a closed client: %v, want %v", err, trustdclient.ErrClosed)
	}

	if dials, _ := trustd.seen(); dials != 0 {
		t.Fatalf("%d connections from a closed client", dials)
	}
}

func TestNewRefuses(t *testing.T) {
	cert := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	pool := x509.NewCertPool

	many := make([]string, trustdclient.MaxEndpoints+1)
	for i := range many {
		many[i] = "cp.example"
	}

	for _, tt := range []struct {
		name string
		cfg  trustdclient.Config
		want string
	}{
		{"no endpoint", trustdclient.Config{Certificate: cert, AcceptedCAs: pool}, "no control-plane endpoint"},
		{"too many endpoints", trustdclient.Config{Endpoints: many, Certificate: cert, AcceptedCAs: pool}, "more than"},
		{"no certificate", trustdclient.Config{Endpoints: []string{"cp"}, AcceptedCAs: pool}, "node certificate"},
		{"no CAs", trustdclient.Config{Endpoints: []string{"cp"}, Certificate: cert}, "accepted CAs"},
		{"bad endpoint", trustdclient.Config{Endpoints: []string{"[cp"}, Certificate: cert, AcceptedCAs: pool}, `endpoint "[cp"`},
		{"bad source", trustdclient.Config{Endpoints: []string{"cp"}, Certificate: cert, AcceptedCAs: pool, Source: "cp"}, `source "cp"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := trustdclient.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestRetryOnceTheCertificateIsThere: a connection refused for want of the
// node's certificate waits out gRPC's reconnect backoff (a second at
// least), and calls in the meantime fail at once; once the certificate is
// there, Retry makes the next call connect at once.
func TestRetryOnceTheCertificateIsThere(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	trustd := startTrustd(t, authority)
	cert := &nodeCert{authority: authority}
	client, err := trustdclient.New(trustdclient.Config{
		Endpoints: []string{trustd.addr}, Source: "127.0.0.1",
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := cert.current.Load(); c != nil {
				return c, nil
			}

			return nil, errors.New("no certificate yet")
		},
		AcceptedCAs: func() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(authority.Cert); return p },
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = client.Close() })

	if _, err := call(ctx, client); err == nil {
		t.Fatal("a call without a certificate answered")
	}

	cert.renew(t)
	client.Retry()

	// Well inside the shortest backoff gRPC waits after a failure.
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()

	if _, err := call(ctx, client); err != nil {
		t.Fatalf("the first call once the certificate is there, after Retry: %v", err)
	}
}

// TestUnknownAuthoritySaysWhy calls a trustd whose certificate chains to
// a CA the node does not accept, as after a rotation the node missed:
// the error says so, and what brings the node back.
func TestUnknownAuthoritySaysWhy(t *testing.T) {
	ctx := testContext(t)
	rotated, old := testCA(t), testCA(t)
	trustd := startTrustd(t, rotated)
	client := newClient(t, old, newNodeCert(t, old), trustd.addr)

	_, err := call(ctx, client)
	if err == nil || !strings.Contains(err.Error(), trustdclient.ErrUnknownAuthority.Error()) {
		t.Fatalf("call to a trustd of another CA: %v, want it to say %q", err, trustdclient.ErrUnknownAuthority)
	}
}

// TestHeldHeartbeats: once trustd says it holds the entry for the
// connection, the worker's Sender sends no heartbeat while that connection
// stays open and the entry is unchanged, and sends one at once when the
// entry changes, the connection closes, the node's certificate is renewed
// or the hold is due.
func TestHeldHeartbeats(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	trustd := startTrustd(t, authority)
	trustd.holdFor.Store(int64(time.Minute))

	cert := newNodeCert(t, authority)
	client := newClient(t, authority, cert, trustd.addr)
	clk := clock.NewFake(time.Now())
	sender := &membershippkg.Sender{Trustd: client, Clock: clk}
	entry := &membershippkg.Member{Hostname: "worker-1"}

	send := func(t *testing.T, m *membershippkg.Member, want int64) {
		t.Helper()

		if err := sender.Send(ctx, m); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}

		if got := trustd.beats.Load(); got != want {
			t.Fatalf("%d heartbeats reached trustd, want %d", got, want)
		}
	}

	send(t, entry, 1)

	t.Run("held: nothing sent", func(t *testing.T) {
		if !sender.Held(entry) {
			t.Fatal("not held")
		}

		send(t, entry, 1)
		send(t, &membershippkg.Member{Hostname: "worker-1"}, 1)
	})

	t.Run("a changed entry is sent", func(t *testing.T) {
		send(t, &membershippkg.Member{Hostname: "worker-1", Version: "v2"}, 2)
		send(t, entry, 3)
	})

	t.Run("a closed connection ends the hold", func(t *testing.T) {
		trustd.dropConns()

		deadline := time.Now().Add(5 * time.Second)
		for sender.Held(entry) {
			if time.Now().After(deadline) {
				t.Fatal("still held after its connection closed")
			}

			time.Sleep(10 * time.Millisecond)
		}

		send(t, entry, 4)
		send(t, entry, 4)
	})

	t.Run("a renewed certificate ends the hold", func(t *testing.T) {
		cert.renew(t)

		if sender.Held(entry) {
			t.Fatal("held on the connection of the certificate before")
		}

		send(t, entry, 5)
		send(t, entry, 5)
	})

	t.Run("a hold due is sent again", func(t *testing.T) {
		clk.Advance(time.Minute)
		send(t, entry, 6)
	})

	t.Run("no hold given: every heartbeat is sent", func(t *testing.T) {
		trustd.holdFor.Store(0)
		clk.Advance(time.Minute)
		send(t, entry, 7)
		send(t, entry, 8)
	})
}
