// Package catest mints CAs, keys and certificate requests for tests.
package catest

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// FixedClock always reads the same time.
type FixedClock time.Time

// Now returns the fixed time.
func (c FixedClock) Now() time.Time { return time.Time(c) }

// NewCA generates a CA of key type kt valid from now.
func NewCA(tb testing.TB, kt ca.KeyType, now time.Time) *ca.CA {
	tb.Helper()

	c, err := ca.Generate(ca.Config{KeyType: kt, Organization: "aegis-test", CommonName: "test CA " + string(kt), Clock: FixedClock(now)})
	if err != nil {
		tb.Fatalf("generating CA: %v", err)
	}

	return c
}

// NewIssuer returns an issuer for c reading the fixed time now.
func NewIssuer(tb testing.TB, c *ca.CA, now time.Time) *ca.Issuer {
	tb.Helper()

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: c, Clock: FixedClock(now)})
	if err != nil {
		tb.Fatalf("building issuer: %v", err)
	}

	return iss
}

// Key generates a key of type kt.
func Key(tb testing.TB, kt ca.KeyType) crypto.Signer {
	tb.Helper()

	k, err := ca.GenerateKey(kt, nil)
	if err != nil {
		tb.Fatalf("generating key: %v", err)
	}

	return k
}

// CSR builds a PEM certificate request from tmpl signed by key, with no
// checks, so tests can build requests the ca package must refuse.
func CSR(tb testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	tb.Helper()

	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		tb.Fatalf("creating CSR: %v", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// Issue makes a certificate for key under profile with roles, through the
// real issuer, and returns it parsed with its PEM.
func Issue(tb testing.TB, iss *ca.Issuer, key crypto.Signer, profile ca.Profile, ttl time.Duration, roles ...role.Role) *ca.Issued {
	tb.Helper()

	csr, err := ca.ParseCSR(CSR(tb, key, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "test"},
		DNSNames: []string{"localhost"},
	}))
	if err != nil {
		tb.Fatalf("parsing CSR: %v", err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: profile, Roles: role.NewSet(roles...), TTL: ttl})
	if err != nil {
		tb.Fatalf("issuing %s certificate: %v", profile, err)
	}

	return issued
}
