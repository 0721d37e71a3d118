// Package trustdtest starts an in-process trustd on a loopback address for
// tests and benchmarks, with real CA, issuer, authenticator and token store,
// a time gate the test opens and closes, and an audit log it can read.
package trustdtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/timesync"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// ListenIP is the loopback address test servers bind (with port 0).
const ListenIP = "127.0.1.1"

// CallerIP is the address a client without an explicit source comes from
// (the kernel's choice for a loopback destination), so the one a static
// token caller may name by default.
const CallerIP = "127.0.0.1"

// StaticToken is the machine-config token of every test server.
const StaticToken = "static.0123456789abcdef"

// Options shape a test server; every field may be left zero.
type Options struct {
	// KeyType of the CA. Zero means Ed25519.
	KeyType ca.KeyType
	// Store holds the dynamic tokens. Nil means a new in-memory store.
	Store tokenstore.Store
	// GateOpen opens the time gate from the start.
	GateOpen bool
	// RateLimit of the server. Zero means a burst high enough that tests
	// of other things never trip it.
	RateLimit trustd.RateLimit
	// Clock of the server and the authenticator. Nil means the system clock.
	Clock clock.Clock
	// CA signs the server's certificate and is the one accepted. Nil
	// generates one: servers that share one accept the same nodes.
	CA *ca.CA
	// ControlPlanes are the control planes' hosts besides the server's own
	// (ListenIP and the name "trustd", from its certificate).
	ControlPlanes []string
	// Names is the cluster's record of node names. Nil keeps none.
	Names trustd.Names
	// Audit and Refusals receive the server's audit records. Nil means
	// Env.Audit's recorder.
	Audit, Refusals *slog.Logger
	// Logger receives the server's operational log. Nil discards it.
	Logger *slog.Logger
	// Revocations is the revocation list the server serves to nodes. Nil
	// serves none.
	Revocations trustd.RevocationSource
	// Metrics receives the server's collectors. Nil means no metrics.
	Metrics prometheus.Registerer
	// BeforeServe, when set, runs on the built server before it serves
	// (to register a test-only service, say).
	BeforeServe func(*trustd.Server)
	// Signer, when set, wraps the server's issuer (to make it fail, say).
	Signer func(trustd.Signer) trustd.Signer
}

// Env is a running test server and what a test needs to talk to it.
type Env struct {
	CA      *ca.CA
	CAs     *ca.AcceptedSet
	Addr    string
	Gate    *timesync.Gate
	Audit   *Recorder
	Store   tokenstore.Store
	KeyPair *certs.KeyPair
	Server  *trustd.Server
	Clock   clock.Clock
	// Auth is the server's authenticator, whose static tokens a test may
	// replace (SetStatic).
	Auth *tokenauth.Authenticator

	stop func() // stops the server and waits for Serve to return
}

// Start runs a server until the test ends.
func Start(tb testing.TB, opts Options) *Env {
	tb.Helper()

	if opts.Store == nil {
		opts.Store = tokenstore.NewMemory(0)
	}

	opts.Clock = defaults.Clock(opts.Clock)

	if opts.RateLimit == (trustd.RateLimit{}) {
		opts.RateLimit = trustd.RateLimit{Burst: 1 << 20}
	}

	authority := opts.CA
	if authority == nil {
		var err error

		authority, err = ca.Generate(ca.Config{KeyType: opts.KeyType, CommonName: "trustdtest CA"})
		must(tb, err)
	}

	cas, err := ca.NewAcceptedSet(time.Now(), authority.Cert)
	must(tb, err)

	e := &Env{CA: authority, CAs: cas, Gate: timesync.NewGate(opts.GateOpen), Audit: NewRecorder(), Store: opts.Store, Clock: opts.Clock}
	e.KeyPair = ServerKeyPair(tb, authority, ListenIP)

	e.Server = newServer(tb, e, opts)
	if opts.BeforeServe != nil {
		opts.BeforeServe(e.Server)
	}

	e.serve(tb)

	return e
}

// newServer builds the server of e from real parts.
func newServer(tb testing.TB, e *Env, opts Options) *trustd.Server {
	tb.Helper()

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: e.CA})
	must(tb, err)

	var signer trustd.Signer = iss
	if opts.Signer != nil {
		signer = opts.Signer(iss)
	}

	static, err := token.Parse(StaticToken)
	must(tb, err)

	auth, err := tokenauth.New(tokenauth.Config{Static: static, Store: opts.Store, Clock: opts.Clock})
	must(tb, err)

	e.Auth = auth

	s, err := trustd.New(trustd.Config{
		Signer:        signer,
		CAs:           accepted{e.CAs},
		Authenticator: auth,
		TimeGate:      e.Gate,
		Certificate:   e.KeyPair,
		Audit:         cmp.Or(opts.Audit, e.Audit.Logger()),
		Refusals:      cmp.Or(opts.Refusals, e.Audit.Logger()),
		Logger:        cmp.Or(opts.Logger, NewRecorder().Logger()),
		RateLimit:     opts.RateLimit,
		Clock:         opts.Clock,
		ControlPlanes: hostList(opts.ControlPlanes),
		Revocations:   opts.Revocations,
		Metrics:       opts.Metrics,
		Names:         opts.Names,
	})
	must(tb, err)

	return s
}

func (e *Env) serve(tb testing.TB) {
	lis, err := net.Listen("tcp", net.JoinHostPort(ListenIP, "0"))
	must(tb, err)

	e.Addr = lis.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)

	go func() { done <- e.Server.Serve(ctx, lis) }()

	var once sync.Once

	e.stop = func() {
		once.Do(func() {
			cancel()

			if err := <-done; err != nil {
				tb.Errorf("Serve: %v", err)
			}
		})
	}

	tb.Cleanup(e.stop)
}

type hostList []string

func (h hostList) ControlPlaneHosts() []string { return h }

// Stop stops the server and waits until Serve returned; the summaries of
// refusals are written by then.
func (e *Env) Stop() { e.stop() }

type accepted struct{ s *ca.AcceptedSet }

func (a accepted) AcceptedCAs() *ca.AcceptedSet { return a.s }

// ServerKeyPair issues a 24h server certificate from authority for the given
// hosts, with a new key of the CA's type.
func ServerKeyPair(tb testing.TB, authority *ca.CA, hosts ...string) *certs.KeyPair {
	tb.Helper()

	kp, err := certs.NewKeyPair(ServerCertificate(tb, authority, hosts...))
	must(tb, err)

	return kp
}

// ServerCertificate is ServerKeyPair's certificate and key as PEM.
func ServerCertificate(tb testing.TB, authority *ca.CA, hosts ...string) (certPEM, keyPEM []byte) {
	tb.Helper()

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: authority})
	must(tb, err)

	issued, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{CommonName: "trustd", Hosts: hosts, Profile: ca.ProfileServer})
	must(tb, err)

	return issued.PEM, keyPEM
}

// Dial connects to the server over TLS verifying its certificate against
// the CA. A non-empty source binds the client's address (127.0.1.0/24), so
// tests can act as distinct callers for the rate limiter.
func (e *Env) Dial(tb testing.TB, source string) *grpc.ClientConn {
	tb.Helper()

	tlsConfig := &tls.Config{RootCAs: e.CAs.Pool(), ServerName: ListenIP, MinVersion: tls.VersionTLS13}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig))}

	if source != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	}

	conn, err := grpc.NewClient(e.Addr, opts...)
	must(tb, err)
	tb.Cleanup(func() { conn.Close() })

	return conn
}

// Client is a SecurityService client on a new connection from source.
func (e *Env) Client(tb testing.TB, source string) securityapi.SecurityServiceClient {
	tb.Helper()

	return securityapi.NewSecurityServiceClient(e.Dial(tb, source))
}

// CreateToken stores a new token valid for ttl with the given use limit and
// allowed SANs and returns it whole.
func (e *Env) CreateToken(tb testing.TB, ttl time.Duration, maxUses uint32, allowedSANs ...string) string {
	tb.Helper()

	tok, err := token.Generate(rand.Reader)
	must(tb, err)

	now := e.Clock.Now()
	r := tokenstore.Record{ID: tok.ID(), Created: now, Expires: now.Add(ttl), MaxUses: maxUses, AllowedSANs: allowedSANs}
	must(tb, r.SetSecret(rand.Reader, tok.Secret()))
	must(tb, e.Store.Create(context.Background(), r))

	return tok.Reveal()
}

// Call asks for a certificate with tok in the token metadata ("" sends none).
func Call(ctx context.Context, c securityapi.SecurityServiceClient, tok string, csrPEM []byte) (*securityapi.CertificateResponse, error) {
	if tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, wire.MetadataToken, tok)
	}

	return c.Certificate(ctx, &securityapi.CertificateRequest{Csr: csrPEM})
}

// CSR returns a PEM CSR for a new key of type kt.
func CSR(tb testing.TB, kt ca.KeyType, commonName string, hosts ...string) []byte {
	tb.Helper()

	key, err := ca.GenerateKey(kt, nil)
	must(tb, err)

	csrPEM, err := ca.NewCSR(key, commonName, hosts)
	must(tb, err)

	return csrPEM
}

// SourceCSR is a CSR a static token caller from source may have signed:
// source as its common name and only SAN.
func SourceCSR(tb testing.TB, kt ca.KeyType, source string) []byte {
	tb.Helper()

	return CSR(tb, kt, source, source)
}

func must(tb testing.TB, err error) {
	tb.Helper()

	if err != nil {
		tb.Fatal(err)
	}
}
