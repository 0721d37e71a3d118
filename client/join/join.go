// Package join is the client a worker node uses to obtain its certificate
// from trustd: it makes a key of its CA's type and a CSR for its names, and
// calls the control-plane endpoints in turn, with backoff and jitter, until
// one signs. The trustd server certificate is verified against the node's
// configured CAs; the token authenticates the node.
package join

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/spread"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// Defaults of the join client.
const (
	// DefaultRetryMin and DefaultRetryMax bound the backoff between
	// attempts. A booting cluster's trustd may need a minute for its first
	// time sync; a worker retrying every 30s at worst joins soon after.
	DefaultRetryMin = time.Second
	DefaultRetryMax = 30 * time.Second
	// DefaultRefusedRetryMax bounds the backoff after trustd refused the
	// token (unknown, expired, used up, revoked). Asking again does not
	// heal that: an operator creates or extends the token, or gives the
	// node another. So the node backs off to one call every five minutes
	// rather than every 30 s, and says why each time.
	DefaultRefusedRetryMax = 5 * time.Minute
	// DefaultCallTimeout bounds one call, connection included.
	DefaultCallTimeout = 30 * time.Second
)

// Transport asks one trustd endpoint ("host:port") to sign csrPEM.
type Transport interface {
	Certificate(ctx context.Context, endpoint string, tok token.Token, csrPEM []byte) (caPEM, crtPEM []byte, err error)
}

// Config configures a Client. Endpoints, Token, CAs and CA are required.
type Config struct {
	// Endpoints are the control planes, "host" or "host:port"; the port
	// defaults to wire.TrustdPort.
	Endpoints []string
	// Token authenticates the node.
	Token token.Token
	// CAs verify trustd's server certificate: the node's accepted CAs.
	CAs *ca.AcceptedSet
	// CA is the node's configured CA certificate; the node key is of its
	// type (Ed25519 for a CA type Aegis does not generate).
	CA *x509.Certificate
	// Hostname is the CSR's common name and first SAN; SANs are the rest.
	Hostname string
	SANs     []string
	// Source is the local address calls are made from. trustd grants a
	// token caller the address its call comes from, so a node on a host
	// with several addresses binds the one its certificate names. Empty
	// lets the system choose.
	//
	// Source is also the node's identity for the order of the endpoints
	// (client/spread, as machined/trustdclient orders them for the node's
	// later calls): the node joins first through the control plane it
	// then keeps to, which has seen it and lets its node certificate's
	// handshakes in apart from strangers. Empty keeps the given order.
	Source string
	// MaxAttempts bounds the calls of one Join; zero means until the
	// context ends. A renewal loop with its own retries sets it to the
	// number of endpoints.
	MaxAttempts int
	// RetryMin, RetryMax, RefusedRetryMax and CallTimeout default to the
	// constants above.
	RetryMin        time.Duration
	RetryMax        time.Duration
	RefusedRetryMax time.Duration
	CallTimeout     time.Duration
	// Transport makes the calls. Nil means gRPC over TLS verified against CAs.
	Transport Transport
	// Clock times the backoff and verifies the result. Nil means the system clock.
	Clock clock.Clock
	// Rand draws the jitter. Nil means crypto/rand. Keys always come from
	// crypto/rand.
	Rand io.Reader
	// Logger receives failed attempts. Nil discards.
	Logger *slog.Logger
}

// Result is a signed node certificate with its key and the CAs trustd sent.
type Result struct {
	Certificate *x509.Certificate
	CertPEM     []byte
	Key         crypto.Signer
	KeyPEM      []byte
	// CAs are the accepted CAs trustd returned, as PEM and parsed.
	CAPEM []byte
	CAs   *ca.AcceptedSet
	// Endpoint answered the request.
	Endpoint string
}

// Client obtains node certificates. It is safe for concurrent use.
type Client struct {
	cfg       Config
	endpoints []string
	keyType   ca.KeyType
	hosts     []string

	mu   sync.Mutex
	next int // round-robin position, kept across Joins
}

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, errors.New("join: no endpoints")
	case cfg.Token.IsZero():
		return nil, errors.New("join: no token")
	case cfg.CAs == nil || cfg.CA == nil:
		return nil, errors.New("join: no CA to verify trustd with")
	case cfg.MaxAttempts < 0:
		return nil, errors.New("join: negative attempt limit")
	}

	given := make([]string, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		given[i] = wire.WithDefaultPort(ep, wire.TrustdPort)
	}

	endpoints := given
	if cfg.Source != "" {
		endpoints = make([]string, 0, len(given))
		for _, i := range spread.Preference([]byte(cfg.Source), given) {
			endpoints = append(endpoints, given[i])
		}
	}

	kt, err := ca.KeyTypeOf(cfg.CA.PublicKey)
	if err != nil {
		kt = ca.Ed25519
	}

	setDefaults(&cfg)

	return &Client{cfg: cfg, endpoints: endpoints, keyType: kt, hosts: nodeHosts(cfg.Hostname, cfg.SANs)}, nil
}

func setDefaults(cfg *Config) {
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRetryMin
	}

	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRetryMax
	}

	if cfg.RefusedRetryMax <= 0 {
		cfg.RefusedRetryMax = max(DefaultRefusedRetryMax, cfg.RetryMax)
	}

	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}

	if cfg.Transport == nil {
		cfg.Transport = GRPCTransport{CAs: cfg.CAs, Source: cfg.Source}
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Logger = defaults.Logger(cfg.Logger)
}

// nodeHosts lists the CSR's SANs: the hostname first, then the rest, each once.
func nodeHosts(hostname string, sans []string) []string {
	var hosts []string

	for _, h := range append([]string{hostname}, sans...) {
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}

	return hosts
}
