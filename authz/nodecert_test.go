package authz_test

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// nodeCerts are a CA, another CA, and a node's and a person's certificate
// the first CA issued, valid for an hour from testutil.Epoch.
type nodeCerts struct {
	osCA, other, node, client *x509.Certificate
}

func newNodeCerts(t *testing.T) nodeCerts {
	t.Helper()

	osCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	iss := catest.NewIssuer(t, osCA, testutil.Epoch)

	return nodeCerts{
		osCA: osCA.Cert, other: catest.NewCA(t, ca.Ed25519, testutil.Epoch).Cert,
		node:   catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileServer, time.Hour).Cert,
		client: catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Admin).Cert,
	}
}

func TestNodeCertificate(t *testing.T) {
	now, c := testutil.Epoch, newNodeCerts(t)
	osCA, other, node, client := c.osCA, c.other, c.node, c.client

	roots := x509.NewCertPool()
	roots.AddCert(osCA)

	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other)

	for _, tc := range []struct {
		name  string
		ctx   context.Context
		roots *x509.CertPool
		at    time.Time
		ok    bool
	}{
		{"a node's certificate", chainCtx(node, nil, nil), roots, now, true},
		{"no peer", context.Background(), roots, now, false},
		{"no certificate", chainCtx(nil, nil, nil), roots, now, false},
		{"a person's client certificate", chainCtx(client, nil, nil), roots, now, false},
		{"another CA", chainCtx(node, nil, nil), otherRoots, now, false},
		{"expired", chainCtx(node, nil, nil), roots, now.Add(2 * time.Hour), false},
		{"no accepted CAs never means the system's", chainCtx(node, nil, nil), nil, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authz.NodeCertificate(tc.ctx, tc.roots, tc.at)
			if tc.ok {
				if err != nil || got != node {
					t.Fatalf("NodeCertificate = %v, %v; want the node's certificate", got, err)
				}

				return
			}

			if !errors.Is(err, authz.ErrNoNodeCertificate) {
				t.Fatalf("NodeCertificate = %v, %v; want ErrNoNodeCertificate", got, err)
			}
		})
	}
}

// TestNodeCertificateMemo: on a connection whose node certificate was
// verified once, what NodeCertificate answers is still what a verification
// would: other roots, a time the chain is not valid at, and another
// certificate are refused; roots equal to the first (another pool), or
// that hold its CA among others, are not.
func TestNodeCertificateMemo(t *testing.T) {
	now, c := testutil.Epoch, newNodeCerts(t)
	osCA, other, node, client := c.osCA, c.other, c.node, c.client

	pool := func(cas ...*x509.Certificate) *x509.CertPool {
		p := x509.NewCertPool()
		for _, c := range cas {
			p.AddCert(c)
		}

		return p
	}

	conn := chainCtxFrom(authz.ContextWithConnMemo(context.Background()), node, nil, nil)

	if got, err := authz.NodeCertificate(conn, pool(osCA), now); err != nil || got != node {
		t.Fatalf("first call: %v, %v", got, err)
	}

	for _, tc := range []struct {
		name  string
		ctx   context.Context
		roots *x509.CertPool
		at    time.Time
		ok    bool
	}{
		{"the same roots, in another pool", conn, pool(osCA), now.Add(time.Minute), true},
		{"the roots and another CA, as in a rotation", conn, pool(osCA, other), now, true},
		{"another CA", conn, pool(other), now, false},
		{"after the certificate expired", conn, pool(osCA), now.Add(2 * time.Hour), false},
		{"before it was valid", conn, pool(osCA), now.Add(-time.Hour), false},
		{"no accepted CAs", conn, nil, now, false},
		{"a person's certificate on a connection of its own", chainCtxFrom(authz.ContextWithConnMemo(context.Background()), client, nil, nil), pool(osCA), now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authz.NodeCertificate(tc.ctx, tc.roots, tc.at)
			plain, plainErr := authz.NodeChain([]*x509.Certificate{node}, tc.roots, tc.at)

			if tc.ctx != conn {
				plain, plainErr = authz.NodeChain([]*x509.Certificate{client}, tc.roots, tc.at)
			}

			if (err == nil) != tc.ok || (plainErr == nil) != tc.ok {
				t.Fatalf("NodeCertificate = %v, %v; a fresh verification = %v, %v; want ok %v", got, err, plain, plainErr, tc.ok)
			}

			if !tc.ok && !errors.Is(err, authz.ErrNoNodeCertificate) {
				t.Fatalf("err = %v, want ErrNoNodeCertificate", err)
			}
		})
	}
}
