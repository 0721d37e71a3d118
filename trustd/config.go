package trustd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
)

// Signer issues certificates from checked CSRs; *ca.Issuer is one.
type Signer interface {
	Issue(req ca.Request) (*ca.Issued, error)
}

// CAProvider gives the CAs returned to a joining node, the set its peers
// are verified against; *certs.MachineConfig is one. It is read on every
// request, so a CA rotation shows up without a restart.
type CAProvider interface {
	AcceptedCAs() *ca.AcceptedSet
}

// Authenticator checks bootstrap tokens and counts their uses.
type Authenticator interface {
	// Authenticate checks a well-formed token and returns what it allows.
	// A refusal wraps ErrInvalidToken; any other error is a failure of the
	// authenticator itself.
	Authenticate(ctx context.Context, tok token.Token) (Grant, error)
	// Consume counts one use of the grant's token, atomically re-checking
	// that it is still usable. It is called once every other check passed,
	// right before signing. A refusal wraps ErrInvalidToken.
	Consume(ctx context.Context, g Grant) error
}

// Grant is what an authenticated token allows.
type Grant struct {
	// TokenID names the token in audit records.
	TokenID string
	// Static marks the machine config's own token, which has no expiry or
	// use limit.
	Static bool
	// Previous marks, with Static, a previous static token that a
	// rotation still accepts until its overlap ends.
	Previous bool
	// AllowedSANs are the names and addresses the token allows besides the
	// caller's own source address, which every token may name; nil allows
	// that address alone (sanpolicy.ForCaller). No token ever obtains a
	// control plane's address or name, whatever it allows.
	AllowedSANs *sanpolicy.Policy
	// Basis is what the authenticator judged the token on, handed back to
	// its Consume so that the use it counts is of the token it
	// authenticated. trustd neither reads nor changes it.
	Basis any
}

// ControlPlanes names the cluster's control planes: their addresses and
// names, which no token may obtain a certificate for. It is read on every
// request, so a changed config shows up without a restart.
type ControlPlanes interface {
	// ControlPlaneHosts returns addresses or names, with or without a port.
	ControlPlaneHosts() []string
}

// TimeGate tells whether the node's clock is synced.
type TimeGate interface {
	// Synced reports whether the gate is open.
	Synced() bool
	// Changed returns a channel closed at the gate's next change; callers
	// take it before reading Synced.
	Changed() <-chan struct{}
}

// CertificateSource serves the server certificate to each handshake, so a
// renewed certificate is used without a restart; *certs.KeyPair is one.
type CertificateSource interface {
	GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
}

// RateLimit configures how failed requests are limited per source address.
// IPv4 sources are counted per address, IPv6 sources per /64 (the block
// one host picks its addresses from). Only sources that failed are
// tracked; a source that never failed is never limited.
type RateLimit struct {
	// Burst is how many failures a source may make in a row. Zero means
	// DefaultFailureBurst.
	Burst int
	// Refill is the time after which one failure is forgiven. Zero means
	// DefaultFailureRefill.
	Refill time.Duration
	// MaxSources bounds the sources tracked. Zero means DefaultMaxSources.
	MaxSources int
}

// Config configures a Server. The first five fields are required; the rest
// may be left zero. New reads the config once; later changes to it have no
// effect, but the dependencies it names are used live.
type Config struct {
	Signer        Signer
	CAs           CAProvider
	Authenticator Authenticator
	TimeGate      TimeGate
	Certificate   CertificateSource

	// Revocations is the client-certificate revocation list served to the
	// cluster's nodes (NodeRevocationService). Nil serves none: the
	// service answers Unimplemented.
	Revocations RevocationSource
	// ControlPlanes lists the control planes' addresses and names besides
	// this node's own, which trustd always reads from its server
	// certificate (Certificate). Nil means only those.
	ControlPlanes ControlPlanes
	// Names is the cluster's record of node names: a token request naming
	// a name is refused when a control plane holds it or another node's
	// live certificate carries it, and the name is bound to the request's
	// addresses before the certificate is returned. Nil keeps no record:
	// a name is then refused only when reserved (ControlPlanes and this
	// node's own certificate), as for trustd on its own, without etcd.
	Names Names
	// Audit receives one record per certificate issued, through its
	// handler: the certificate is sent once the handler has returned, and
	// withheld if it returned an error (a durable log returns once the
	// record is on disk). Nil means Logger with the attribute log=audit.
	Audit *slog.Logger
	// Refusals receives the records of refused requests, aggregated: the
	// first refusal of a source per RefusalInterval in full, the others
	// in one summary of the source at the interval's end. Keeping them
	// apart from Audit lets a flood of refusals never push issuance
	// records out of a bounded log. Nil means Audit.
	Refusals *slog.Logger
	// Logger receives operational messages. Nil discards.
	Logger *slog.Logger
	// RateLimit limits failed requests per source.
	RateLimit RateLimit
	// CertTTL is the lifetime of issued certificates; zero means
	// MaxCertTTL, and anything outside [MinCertTTL, MaxCertTTL] is refused.
	CertTTL time.Duration
	// Metrics receives trustd's collectors: gRPC calls by method and code,
	// issuances and refusals by reason, the time gate, connections against
	// their caps, certificate expiry. Nil means no metrics.
	Metrics prometheus.Registerer
	// Clock drives the rate limiter and dates issuance records. Nil means
	// the system clock.
	Clock clock.Clock
	// Rand draws the request references of audit records. Nil means
	// crypto/rand.
	Rand io.Reader
	// Services registers further services on trustd's listener (the
	// membership heartbeats of workers). They authenticate their callers
	// themselves: trustd asks for a client certificate but verifies none,
	// as a joining node has none. Nil adds nothing.
	Services func(grpc.ServiceRegistrar)
}

func (cfg *Config) check() error {
	var missing []string

	for _, f := range []struct {
		name  string
		isNil bool
	}{
		{"Signer", cfg.Signer == nil},
		{"CAs", cfg.CAs == nil},
		{"Authenticator", cfg.Authenticator == nil},
		{"TimeGate", cfg.TimeGate == nil},
		{"Certificate", cfg.Certificate == nil},
	} {
		if f.isNil {
			missing = append(missing, f.name)
		}
	}

	if len(missing) > 0 {
		return fmt.Errorf("trustd: config lacks %v", missing)
	}

	if cfg.CertTTL != 0 && (cfg.CertTTL < MinCertTTL || cfg.CertTTL > MaxCertTTL) {
		return fmt.Errorf("trustd: certificate lifetime %s outside [%s, %s]", cfg.CertTTL, MinCertTTL, MaxCertTTL)
	}

	if cfg.RateLimit.Burst < 0 || cfg.RateLimit.Refill < 0 || cfg.RateLimit.MaxSources < 0 {
		return errors.New("trustd: negative rate limit setting")
	}

	return nil
}

func (cfg *Config) setDefaults() {
	cfg.Logger = defaults.Logger(cfg.Logger)

	if cfg.Audit == nil {
		cfg.Audit = cfg.Logger.With(slog.String(logkey.Log, "audit"))
	}

	if cfg.Refusals == nil {
		cfg.Refusals = cfg.Audit
	}

	if cfg.CertTTL == 0 {
		cfg.CertTTL = MaxCertTTL
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)

	rl := &cfg.RateLimit
	if rl.Burst == 0 {
		rl.Burst = DefaultFailureBurst
	}

	if rl.Refill == 0 {
		rl.Refill = DefaultFailureRefill
	}

	if rl.MaxSources == 0 {
		rl.MaxSources = DefaultMaxSources
	}
}
