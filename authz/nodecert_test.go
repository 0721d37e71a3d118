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

func TestNodeCertificate(t *testing.T) {
	now := testutil.Epoch
	osCA := catest.NewCA(t, ca.Ed25519, now)
	iss := catest.NewIssuer(t, osCA, now)
	other := catest.NewCA(t, ca.Ed25519, now)
	node := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileServer, time.Hour).Cert
	client := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Admin).Cert

	roots := x509.NewCertPool()
	roots.AddCert(osCA.Cert)

	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other.Cert)

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
