package ca_test

import (
	"crypto/x509"
	"errors"
	"slices"
	"testing"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// TestPeerProfile: etcd's certificates serve and dial with one key, so the
// peer profile grants both EKUs, and never roles.
func TestPeerProfile(t *testing.T) {
	iss := catest.NewIssuer(t, catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), testutil.Epoch)
	key := catest.Key(t, ca.ECDSAP256)

	issued := catest.Issue(t, iss, key, ca.ProfilePeer, 0)
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(issued.Cert.ExtKeyUsage, want) {
		t.Fatalf("EKU = %v, want %v", issued.Cert.ExtKeyUsage, want)
	}

	if len(issued.Cert.Subject.Organization) != 0 {
		t.Fatalf("Organization = %q, want none", issued.Cert.Subject.Organization)
	}

	csr, err := ca.ParseCSR(catest.CSR(t, key, &x509.CertificateRequest{}))
	if err != nil {
		t.Fatal(err)
	}

	_, err = iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfilePeer, Roles: role.NewSet(role.Admin)})
	if !errors.Is(err, ca.ErrRoles) {
		t.Fatalf("peer certificate with roles: %v, want ErrRoles", err)
	}
}
