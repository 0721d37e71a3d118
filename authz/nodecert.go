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

	return NodeChain(info.State.PeerCertificates, roots, now)
}

// NodeChain is NodeCertificate's check of a chain a peer presented in its
// handshake (leaf first): the leaf once verified as a node's own. A
// listener uses it at the end of a handshake to tell a cluster's nodes
// from anonymous callers (connlimit's proven table).
func NodeChain(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (*x509.Certificate, error) {
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

	if _, err := chain[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNodeCertificate, err)
	}

	return chain[0], nil
}
