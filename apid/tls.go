package apid

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/refusals"
	"github.com/aegis-os/aegis/internal/source"
)

// errNoAcceptedCAs refuses a handshake when the trust source has no set.
var errNoAcceptedCAs = errors.New("apid: no accepted CAs")

// serverTLS is the listener's TLS config. It is never changed: every
// handshake gets a config of its own from configForClient, built from the
// certificate and CAs current at that moment.
func (s *Server) serverTLS() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		GetConfigForClient: s.configForClient,
	}
}

// configForClient verifies a client certificate, when one is sent, against
// an accepted CA at the configured clock's time (crypto/tls checks both),
// and with authz.CheckClientChain: signed directly by that CA, not a CA
// itself, naming ClientAuth explicitly. A client without a certificate
// completes the handshake so that it can probe the health service (see
// health.go); the authentication interceptor refuses it every other call
// (Unauthenticated), since it has no verified chain. Session tickets are
// off so that every connection is verified against the CAs accepted now,
// not those of an earlier handshake.
func (s *Server) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	pool, err := s.pools.get(s.accepted())
	if err != nil {
		return nil, err
	}

	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		GetCertificate:         s.cert.GetCertificate,
		ClientAuth:             tls.VerifyClientCertIfGiven,
		ClientCAs:              pool,
		NextProtos:             []string{"h2"},
		SessionTicketsDisabled: true,
		VerifyConnection:       s.verifyClientChain,
		Time:                   s.clock.Now,
		Rand:                   s.rand,
	}, nil
}

// certified reports whether the client of a finished handshake presented a
// certificate: one the handshake verified (crypto/tls against the accepted
// CAs, then verifyClientChain), an operator's or another node's. Its
// connection then counts against MaxCertifiedConnections rather than the
// anonymous caps, which health probes without a certificate share with
// floods.
func certified(cs tls.ConnectionState) bool { return len(cs.PeerCertificates) > 0 }

// verifyClientChain refuses a revoked client certificate and applies
// authz.CheckClientChain to the chain crypto/tls verified: crypto/tls accepts intermediates the client sends along, CA
// leaves and leaves without extended key usage, none of which Aegis issues
// to a client. A client that sent no certificate passes here and is
// refused by the authentication interceptor at every call but a health
// probe; one that sent a certificate crypto/tls did not verify is refused.
func (s *Server) verifyClientChain(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}

	if len(cs.VerifiedChains) == 0 {
		return authz.ErrUnauthenticated
	}

	if err := s.revoked.check(cs.VerifiedChains[0][0]); err != nil {
		return err
	}

	return authz.CheckClientChain(cs.VerifiedChains[0])
}

// Refusals of recheckClient; the error returned wraps one of them and says
// which certificate and when.
var (
	errCANotAccepted = errors.New("apid: the client certificate's CA is no longer accepted")
	errChainExpired  = errors.New("apid: a certificate of the client's chain is not valid now")
)

// recheckClient runs over the life of every open call (streamGuard), and
// as recheckCall at every call: the handshake verified the chain when the
// connection opened, and this keeps the verdict current while it stays
// open. Signatures do not change; what can is whether the client
// certificate was revoked, whether the chain's CA is still accepted (a
// finished rotation) and whether every certificate of it is still valid
// at the clock's time.
func (s *Server) recheckClient(chain []*x509.Certificate) error {
	return s.recheckChain(chain, serialText(chain[0]))
}

// recheckCall is recheckClient at the start of a call, with the serial
// its connection's first call wrote out.
func (s *Server) recheckCall(ctx context.Context, chain []*x509.Certificate) error {
	return s.recheckChain(chain, peerOf(ctx, chain).serial)
}

func (s *Server) recheckChain(chain []*x509.Certificate, serial string) error {
	if err := s.revoked.checkSerial(serial); err != nil {
		return err
	}

	set := s.accepted()
	if set == nil {
		return errNoAcceptedCAs
	}

	if !set.Contains(chain[len(chain)-1]) {
		return errCANotAccepted
	}

	now := s.clock.Now()
	for i, c := range chain {
		what := "the client certificate"
		if i > 0 {
			what = "the client certificate's CA"
		}

		switch {
		case now.After(c.NotAfter):
			return fmt.Errorf("%w: %s expired at %s", errChainExpired, what, c.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(c.NotBefore):
			return fmt.Errorf("%w: %s is not valid before %s", errChainExpired, what, c.NotBefore.UTC().Format(time.RFC3339))
		}
	}

	return nil
}

// caPoolCache keeps the verification pool of the last accepted set, so a
// handshake builds a pool only when the set changed.
type caPoolCache struct {
	last atomic.Pointer[cachedPool]
}

type cachedPool struct {
	set  *ca.AcceptedSet
	pool *x509.CertPool
}

func (c *caPoolCache) get(set *ca.AcceptedSet) (*x509.CertPool, error) {
	if set == nil {
		return nil, errNoAcceptedCAs
	}

	if p := c.last.Load(); p != nil && p.set == set {
		return p.pool, nil
	}

	p := &cachedPool{set: set, pool: set.Pool()}
	c.last.Store(p)

	return p.pool, nil
}

// forwardTLS is the client config for a connection to another node's apid.
// The node's server certificate is checked in verifyNode against the CAs
// accepted at the time of each handshake, which a fixed RootCAs could not
// follow through a rotation.
func (s *Server) forwardTLS(t target) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		ServerName:           t.host,
		GetClientCertificate: s.forward.GetClientCertificate,
		// Verification is not skipped: VerifyConnection does it in full.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.verifyNode(cs, t)
		},
		Time: s.clock.Now,
		Rand: s.rand,
	}
}

// errNodeMisnamed refuses a peer whose certificate does not name the node
// apid was asked for: a squatted address, or a stale member entry whose
// address another node now has. The handshake fails, so not one byte of
// the call reaches that peer.
var errNodeMisnamed = errors.New("apid: the node's certificate does not name it")

// verifyNode checks another node's server certificate: it chains to an
// accepted CA, is valid now, carries ServerAuth, and names t: its host
// (the address dialed, or an endpoint's DNS name) and, for a member named
// by its hostname, that hostname too.
func (s *Server) verifyNode(cs tls.ConnectionState, t target) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("apid: node presented no certificate")
	}

	set := s.accepted()
	if set == nil {
		return errNoAcceptedCAs
	}

	leaf := cs.PeerCertificates[0]
	if err := set.Verify(leaf, x509.ExtKeyUsageServerAuth, s.clock.Now()); err != nil {
		return fmt.Errorf("apid: node certificate: %w", err)
	}

	for _, name := range []string{t.host, t.memberName} {
		if name == "" {
			continue
		}

		if err := leaf.VerifyHostname(name); err != nil {
			return fmt.Errorf("%w: %s: %w", errNodeMisnamed, name, err)
		}
	}

	return nil
}

// auditedCreds logs every refused handshake: a refused client certificate
// (missing, from another CA, expired, without ClientAuth) never reaches
// the interceptors, so this is where its audit record is written. The
// records go through the refusals aggregator: the first refusal of a
// source per HandshakeRefusalInterval in full, the others in a summary,
// so that a flood of bad handshakes cannot flood the log.
type auditedCreds struct {
	credentials.TransportCredentials
	log      *slog.Logger
	refusals *refusals.Aggregator
	counted  *metrics.HandshakeRefusalCounter
}

func (c auditedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)

	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		// Closed before a ClientHello: a port probe (machined's health
		// check, a scanner), not a refused client. Nothing to audit.
		c.log.Debug("connection closed before the tls handshake", slog.String(logkey.Peer, conn.RemoteAddr().String()))
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
		// Too slow, or closed by the listener for making no call: nothing
		// about a client's certificate, and a flood makes thousands of
		// them, which the listener's bounds deal with.
		c.log.Debug("tls handshake cut short", slog.String(logkey.Peer, conn.RemoteAddr().String()),
			slog.String(logkey.Error, err.Error()))
	default:
		kind := handshakeKind(err)
		c.counted.Count(handshakeReason(kind))
		c.refusals.Refuse(context.Background(), source.Key(source.Addr(conn.RemoteAddr())), kind, msgHandshakeRefused,
			slog.String(logkey.Peer, conn.RemoteAddr().String()), slog.String(logkey.Error, err.Error()))
	}

	return out, info, err
}

func (c auditedCreds) Clone() credentials.TransportCredentials {
	return auditedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, refusals: c.refusals, counted: c.counted}
}

// Messages of handshake refusals: one in full, and the summary of the
// others of a source.
const (
	msgHandshakeRefused  = "tls handshake refused"
	msgHandshakesRefused = "tls handshakes refused"
)

// handshakeKind sorts a handshake refusal into a small fixed set, which
// the summary of a source counts.
func handshakeKind(err error) string {
	var verify *tls.CertificateVerificationError

	switch {
	case errors.Is(err, errRevoked):
		return kindRevoked
	case errors.As(err, &verify):
		return kindCertificate
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return kindNoCertificate
	default:
		return kindHandshake
	}
}

// Kinds of handshake refusals, as handshakeKind sorts them.
const (
	kindRevoked       = "revoked"
	kindCertificate   = "certificate"
	kindNoCertificate = "no certificate"
	kindHandshake     = "handshake"
)

// handshakeReasons are the metrics' reasons of refused handshakes.
func handshakeReasons() []string {
	out := []string{}
	for _, k := range []string{kindRevoked, kindCertificate, kindNoCertificate, kindHandshake} {
		out = append(out, handshakeReason(k))
	}

	return out
}

// handshakeReason is a kind as the metrics label it: without spaces.
func handshakeReason(kind string) string { return strings.ReplaceAll(kind, " ", "_") }

// forwardCredential names the forwarding certificate a new connection to
// another node presents now: its DER (shared, not copied: a pair is never
// modified once set), or nil when there is none.
func (s *Server) forwardCredential() []byte {
	if s.forward == nil {
		return nil
	}

	c, err := s.forward.GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil || c == nil || len(c.Certificate) == 0 {
		return nil
	}

	return c.Certificate[0]
}
