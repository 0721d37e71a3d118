package authz

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ErrNoNodeCertificate is returned when the caller presented no
// certificate in its TLS handshake, or one that is not a node's.
var ErrNoNodeCertificate = errors.New("authz: no node certificate of an accepted CA")

// NodeCertificate returns the certificate the caller of ctx presented in
// its TLS handshake, once verified as a node's own: a ServerAuth
// certificate, valid at now, chained to roots through the intermediates
// the caller sent. Every node holds one and no client configuration does,
// so it tells a node from a person on a listener that only requests
// certificates (trustd's). A nil roots accepts nothing: it never falls
// back to the system's roots.
//
// On a connection with a memo (ContextWithConnMemo) the verification is
// kept: a later call verified against roots equal to these, at a time
// every certificate of the chain is valid, is answered from it. The chain
// is the handshake's and does not change on the connection, and nothing
// else goes into the verification, so the answer is the same; a node's
// heartbeats on one connection cost one verification, not one each.
func NodeCertificate(ctx context.Context, roots *x509.CertPool, now time.Time) (*x509.Certificate, error) {
	if roots == nil {
		return nil, fmt.Errorf("%w: no accepted CAs yet", ErrNoNodeCertificate)
	}

	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, ErrNoNodeCertificate
	}

	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, ErrNoNodeCertificate
	}

	chain := info.State.PeerCertificates
	memo, _ := ctx.Value(connMemoKey{}).(*connMemo)

	if memo != nil && len(chain) > 0 {
		if v := memo.node.Load(); v != nil && v.leaf == chain[0] && v.valid(roots, now) {
			return v.leaf, nil
		}
	}

	verified, err := verifyNode(chain, roots, now)
	if err != nil {
		return nil, err
	}

	if memo != nil {
		memo.node.Store(verified)
	}

	return verified.leaf, nil
}

// NodeChain is NodeCertificate's check of a chain a peer presented in its
// handshake (leaf first): the leaf once verified as a node's own. A
// listener uses it at the end of a handshake to tell a cluster's nodes
// from anonymous callers (connlimit's proven table).
func NodeChain(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (*x509.Certificate, error) {
	verified, err := verifyNode(chain, roots, now)
	if err != nil {
		return nil, err
	}

	return verified.leaf, nil
}

// nodeVerified is a node certificate chain as verified: the leaf, the
// roots it chained to, and the span of time in which every certificate of
// the chain found is valid.
type nodeVerified struct {
	leaf        *x509.Certificate
	roots       *x509.CertPool
	from, until time.Time
}

// valid reports whether the verification holds for roots at now.
func (v *nodeVerified) valid(roots *x509.CertPool, now time.Time) bool {
	return v.roots.Equal(roots) && !now.Before(v.from) && !now.After(v.until)
}

func verifyNode(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (*nodeVerified, error) {
	switch {
	case roots == nil:
		return nil, fmt.Errorf("%w: no accepted CAs yet", ErrNoNodeCertificate)
	case len(chain) == 0:
		return nil, ErrNoNodeCertificate
	}

	inter := x509.NewCertPool()

	for _, c := range chain[1:] {
		inter.AddCert(c)
	}

	chains, err := chain[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNodeCertificate, err)
	}

	v := &nodeVerified{leaf: chain[0], roots: roots, from: chain[0].NotBefore, until: chain[0].NotAfter}

	for _, c := range chains[0] {
		if c.NotBefore.After(v.from) {
			v.from = c.NotBefore
		}

		if c.NotAfter.Before(v.until) {
			v.until = c.NotAfter
		}
	}

	return v, nil
}
