package node

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/renewal"
)

// NodeCertTTL is the default lifetime of the node's own certificates and,
// on a control plane, of those its trustd signs; they are renewed at
// half-life. Config.NodeCertTTL changes it.
const NodeCertTTL = 24 * time.Hour

// certController obtains the node's certificates and keeps them fresh: a
// control plane issues them from the OS CA it holds, a worker gets its
// server certificate from trustd. Every new certificate is published to the
// resources store, from which apid and trustd pick it up, and kept in the
// state directory for the next boot.
type certController struct {
	cfg *certs.MachineConfig
	// current, if set, returns the config in effect: the boot's, with the
	// live fields of a config applied since (token, accepted CAs), which
	// renewals follow. Nil means cfg.
	current  func() *certs.MachineConfig
	store    *resources.Store
	layout   layout.Layout
	hostname string
	// addresses are the node's own: on a worker, what it can show trustd
	// (the address its call comes from), so what its certificate names.
	addresses []string
	hosts     []string // SANs of a control plane's server certificate
	ttl       time.Duration
	clock     clock.Clock
	log       *slog.Logger

	// mu guards renewers, one per certificate kind, set once obtain is
	// done, lastReply, the CAs of trustd's last reply (a worker's), and
	// lastNameRenewal.
	mu        sync.Mutex
	renewers  []kindRenewer
	lastReply *ca.AcceptedSet
	// lastNameRenewal is when a refused heartbeat last made a worker
	// renew for its name (renewForName).
	lastNameRenewal time.Time
}

// kindRenewer is the renewal loop of one of the node's certificates.
type kindRenewer struct {
	kind certKind
	r    *renewal.Renewer
}

// run obtains the certificates the node lacks (a held one still usable is
// kept: see usableHeld), waiting (a worker retrying its join) until it has
// them, then renews them all until ctx ends.
func (c *certController) run(ctx context.Context) error {
	loops, err := c.obtain(ctx)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Go(func() { _ = loop(ctx) })
	}

	wg.Wait()

	return nil
}

// obtain gets the node's missing certificates and returns the loops that
// renew them.
func (c *certController) obtain(ctx context.Context) ([]func(context.Context) error, error) {
	if c.cfg.OSCA() != nil {
		return c.issueLocally(ctx)
	}

	return c.join(ctx)
}

func (c *certController) issueLocally(ctx context.Context) ([]func(context.Context) error, error) {
	var (
		loops []func(context.Context) error
		err   error
	)

	for _, kind := range c.kinds() {
		cn, hosts := c.hostname, c.hosts
		if kind.name != serverKind.name {
			hosts = nil
		}

		// From the CA in effect: a rotation makes another CA the issuing
		// one without a reboot.
		issue := func(context.Context) (*x509.Certificate, error) {
			iss, err := ca.NewIssuer(ca.IssuerConfig{CA: c.config().OSCA(), Clock: c.clock})
			if err != nil {
				return nil, err
			}

			issued, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{CommonName: cn, Hosts: hosts, Profile: kind.profile, TTL: c.ttl})
			if err != nil {
				return nil, err
			}

			c.publish(kind, &node.KeyPair{Crt: issued.PEM, Key: keyPEM}, nil)

			return issued.Cert, nil
		}

		first := c.held(kind)
		if first == nil {
			if first, err = issue(ctx); err != nil {
				return nil, fmt.Errorf("issuing the %s certificate: %w", kind.profile, err)
			}
		}

		loop, err := c.renewer(kind, first, issue)
		if err != nil {
			return nil, err
		}

		loops = append(loops, loop)
	}

	return loops, nil
}

// config is the machine config the controller follows.
func (c *certController) config() *certs.MachineConfig {
	if c.current != nil {
		return c.current()
	}

	return c.cfg
}

// joinClients makes join clients from the config in effect, again when it
// has changed (a token or accepted CAs applied live); a client kept starts
// from the endpoint that answered last.
type joinClients struct {
	c          *certController
	cn, source string
	sans       []string
	// Renewals try each endpoint once and leave the retries to the
	// renewer; the first join retries until it succeeds (maxAttempts 0).
	maxAttempts func(*certs.MachineConfig) int

	from   *certs.MachineConfig
	client *join.Client
}

func (j *joinClients) get() (*join.Client, *certs.MachineConfig, error) {
	cfg := j.c.config()
	if j.client != nil && j.from == cfg {
		return j.client, cfg, nil
	}

	client, err := join.New(join.Config{
		Endpoints: cfg.Cluster.ControlPlane.Endpoints, Token: cfg.TrustdToken(),
		CAs: cfg.AcceptedCAs(), CA: cfg.CACertificate(), Hostname: j.cn, SANs: j.sans, Source: j.source,
		MaxAttempts: j.maxAttempts(cfg), Clock: j.c.clock, Logger: j.c.log,
	})
	if err != nil {
		return nil, nil, err
	}

	j.client, j.from = client, cfg

	return client, cfg, nil
}

func (c *certController) join(ctx context.Context) ([]func(context.Context) error, error) {
	source, cn, sans := c.joinNames()

	first := c.joinPair(source, cn, sans, func(*certs.MachineConfig) int { return 0 })
	again := c.joinPair(source, cn, sans, func(cfg *certs.MachineConfig) int {
		return len(cfg.Cluster.ControlPlane.Endpoints)
	})

	if _, _, err := first.named.get(); err != nil {
		return nil, err
	}

	joinOnce := func(clients joinPair) func(ctx context.Context) (*x509.Certificate, error) {
		return func(ctx context.Context) (*x509.Certificate, error) {
			res, cfg, err := clients.join(ctx)
			if err != nil {
				return nil, err
			}

			c.mu.Lock()
			c.lastReply = res.CAs
			c.mu.Unlock()

			merged, ignored := mergeCAs(cfg.AcceptedCAs(), res.CAs)
			for _, subject := range ignored {
				c.log.Warn("CA in trustd's reply ignored: no CA the node trusts signed it", slog.String(logkey.CA, subject))
			}

			// The config's CAs and those trustd accepts now that one of
			// them signed: a CA that trustd dropped at the end of a
			// rotation leaves the worker at its next renewal, not only at
			// its next reboot, and no reply adds a CA of its own.
			c.publish(serverKind, &node.KeyPair{Crt: res.CertPEM, Key: res.KeyPEM}, func(r *node.Resources) {
				r.AcceptedCas = merged
			})

			c.log.Info("joined through trustd", slog.String(logkey.Endpoint, res.Endpoint), slog.Time(logkey.NotAfter, res.Certificate.NotAfter))

			return res.Certificate, nil
		}
	}

	cert := c.held(serverKind)
	if cert == nil {
		var err error
		if cert, err = joinOnce(first)(ctx); err != nil {
			return nil, fmt.Errorf("joining through trustd: %w", err)
		}
	}

	loop, err := c.renewer(serverKind, cert, joinOnce(again))
	if err != nil {
		return nil, err
	}

	return []func(context.Context) error{loop}, nil
}

// joinNames are what a worker asks trustd for. A token obtains by default
// only the address its call comes from (and what the token allows), so the
// worker binds its listen address, when it has one, as the source of the
// call and asks for its own addresses, its hostname and the config's
// certSANs: not 127.0.0.1, which every control plane names too. trustd
// grants the hostname when no control plane and no other node holds it,
// and binds it to the worker's addresses. The common name is the first
// address.
func (c *certController) joinNames() (source, cn string, sans []string) {
	if a, err := netip.ParseAddr(c.cfg.Machine.ListenAddress); err == nil && !a.IsUnspecified() {
		source = a.String()
	}

	for _, h := range slices.Concat(c.addresses, c.ownName(), c.cfg.Machine.CertSANs) {
		if h != "" && !slices.Contains(sans, h) {
			sans = append(sans, h)
		}
	}

	cn = c.hostname
	if len(sans) > 0 {
		cn = sans[0]
	}

	return source, cn, sans
}

// ownName is the node's hostname as a SAN its certificate must carry, when
// it is a DNS name (one that is not cannot be a SAN, and the node is then
// known by its address alone).
func (c *certController) ownName() []string {
	if ca.CheckDNSName(c.hostname) != nil {
		return nil
	}

	return []string{c.hostname}
}

func (c *certController) renewer(kind certKind, cur *x509.Certificate, renew func(context.Context) (*x509.Certificate, error)) (func(context.Context) error, error) {
	r, err := renewal.New(renewal.Config{Current: cur, Renew: renew, Clock: c.clock, Logger: c.log})
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	c.renewers = append(c.renewers, kindRenewer{kind: kind, r: r})
	c.mu.Unlock()

	return r.Run, nil
}

// errNoCertificatesYet answers a re-issue asked for before the node has
// obtained its certificates.
var errNoCertificatesYet = errors.New("node: the node has not obtained its certificates yet")

// reissue renews every certificate of the node now, from the CA in effect
// (a worker's through trustd), and returns them by kind. It stops at the
// first failure: the certificates not renewed stay in use.
func (c *certController) reissue(ctx context.Context) (map[string]*x509.Certificate, error) {
	c.mu.Lock()
	renewers := slices.Clone(c.renewers)
	c.mu.Unlock()

	if len(renewers) < len(c.kinds()) {
		return nil, errNoCertificatesYet
	}

	out := map[string]*x509.Certificate{}

	for _, kr := range renewers {
		cert, err := kr.r.RenewNow(ctx)
		if err != nil {
			return nil, fmt.Errorf("node: re-issuing the %s certificate: %w", kr.kind.name, err)
		}

		out[kr.kind.name] = cert
	}

	return out, nil
}

// acceptedFor is the accepted set of the node under cfg, as a PEM bundle:
// on a worker, cfg's CAs merged with trustd's last reply by the rule of a
// renewal (mergeCAs). So a live change of the accepted CAs and trustd's
// reply never fight: the config decides, a CA it drops stays dropped
// unless a CA it keeps signed it, and what the reply added under the
// config's CAs is kept until the next renewal says otherwise.
func (c *certController) acceptedFor(cfg *certs.MachineConfig) []byte {
	c.mu.Lock()
	reply := c.lastReply
	c.mu.Unlock()

	if reply == nil {
		return cfg.AcceptedCAs().PEM()
	}

	merged, _ := mergeCAs(cfg.AcceptedCAs(), reply)

	return merged
}

// mergeCAs adds to the PEM bundle of trusted the CAs of reply that one of
// trusted signed (a rotation's new CA, cross-signed by the one it
// replaces), keeping the order. A renewal never makes the node trust a CA
// on the reply's word alone: the others are left out, and their subjects
// returned.
func mergeCAs(trusted, reply *ca.AcceptedSet) ([]byte, []string) {
	out := trusted.PEM()

	var ignored []string

	for _, c := range reply.Certificates() {
		p := ca.EncodeCertificate(c)

		switch {
		case bytes.Contains(out, p):
		case signedByOneOf(c, trusted.Certificates()):
			out = append(out, p...)
		default:
			ignored = append(ignored, c.Subject.String())
		}
	}

	return out, ignored
}

func signedByOneOf(c *x509.Certificate, parents []*x509.Certificate) bool {
	for _, p := range parents {
		if c.CheckSignatureFrom(p) == nil {
			return true
		}
	}

	return false
}
