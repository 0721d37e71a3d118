package ca_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestIssueProfiles(t *testing.T) {
	tests := []struct {
		profile ca.Profile
		roles   []role.Role
		eku     x509.ExtKeyUsage
		org     []string
	}{
		{profile: ca.ProfileServer, eku: x509.ExtKeyUsageServerAuth},
		{profile: ca.ProfileClient, roles: []role.Role{role.Reader, role.Operator}, eku: x509.ExtKeyUsageClientAuth, org: []string{"os:operator", "os:reader"}},
		{profile: ca.ProfileImpersonator, eku: x509.ExtKeyUsageClientAuth, org: []string{"os:impersonator"}},
	}

	for _, kt := range ca.KeyTypes() {
		authority := catest.NewCA(t, kt, testutil.Epoch)
		iss := catest.NewIssuer(t, authority, testutil.Epoch)
		accepted, err := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
		if err != nil {
			t.Fatal(err)
		}

		for _, tt := range tests {
			t.Run(string(kt)+"/"+string(tt.profile), func(t *testing.T) {
				issued := catest.Issue(t, iss, catest.Key(t, kt), tt.profile, 0, tt.roles...)
				cert := issued.Cert

				if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{tt.eku}) {
					t.Fatalf("EKU = %v, want only %v", cert.ExtKeyUsage, tt.eku)
				}

				if !slices.Equal(slices.Sorted(slices.Values(cert.Subject.Organization)), tt.org) {
					t.Fatalf("organization = %q, want %q", cert.Subject.Organization, tt.org)
				}

				if cert.IsCA || cert.KeyUsage != x509.KeyUsageDigitalSignature {
					t.Fatalf("CA=%v key usage=%v", cert.IsCA, cert.KeyUsage)
				}

				if got, want := cert.NotAfter.Sub(cert.NotBefore), ca.DefaultsFor(tt.profile).TTL; got != want {
					t.Fatalf("lifetime = %s, want %s", got, want)
				}

				if bits := cert.SerialNumber.BitLen(); bits == 0 || bits > 128 {
					t.Fatalf("serial has %d bits", bits)
				}

				if err := accepted.Verify(cert, tt.eku, testutil.Epoch); err != nil {
					t.Fatalf("does not verify against its CA: %v", err)
				}
			})
		}
	}
}

func TestIssueTakesNoAuthorityFromCSR(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	iss := catest.NewIssuer(t, authority, testutil.Epoch)
	key := catest.Key(t, ca.Ed25519)

	ekuExt, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 2}, {1, 3, 6, 1, 5, 5, 7, 3, 3}})
	kuExt, _ := asn1.Marshal(asn1.BitString{Bytes: []byte{0x06}, BitLength: 7}) // keyCertSign|cRLSign

	csr, err := ca.ParseCSR(catest.CSR(t, key, &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:         "node-1",
			Organization:       []string{"os:admin", "os:impersonator"},
			OrganizationalUnit: []string{"ops"},
			Country:            []string{"ZZ"},
		},
		DNSNames: []string{"node-1"},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Value: ekuExt},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 15}, Critical: true, Value: kuExt},
		},
	}))
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		profile ca.Profile
		roles   role.Set
		org     []string
	}{
		{profile: ca.ProfileServer, org: nil},
		{profile: ca.ProfileClient, roles: role.NewSet(role.Reader), org: []string{"os:reader"}},
	} {
		t.Run(string(tt.profile), func(t *testing.T) {
			issued, err := iss.Issue(ca.Request{CSR: csr, Profile: tt.profile, Roles: tt.roles})
			if err != nil {
				t.Fatal(err)
			}

			got := issued.Cert
			if !slices.Equal(got.Subject.Organization, tt.org) {
				t.Fatalf("organization = %q, want %q", got.Subject.Organization, tt.org)
			}

			if len(got.Subject.OrganizationalUnit) > 0 || len(got.Subject.Country) > 0 {
				t.Fatalf("subject kept CSR fields: %s", got.Subject)
			}

			if got.Subject.CommonName != "node-1" || !slices.Equal(got.DNSNames, []string{"node-1"}) {
				t.Fatalf("lost the CSR's name: CN=%q DNS=%q", got.Subject.CommonName, got.DNSNames)
			}

			if got.KeyUsage != x509.KeyUsageDigitalSignature || len(got.ExtKeyUsage) != 1 || got.IsCA {
				t.Fatalf("key usage from CSR leaked: ku=%v eku=%v ca=%v", got.KeyUsage, got.ExtKeyUsage, got.IsCA)
			}
		})
	}
}

func TestIssueRoleRefusals(t *testing.T) {
	iss := catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, testutil.Epoch), testutil.Epoch)
	csr := parsedCSR(t)

	tests := []struct {
		name    string
		profile ca.Profile
		roles   role.Set
		want    error
	}{
		{name: "client without roles", profile: ca.ProfileClient, want: ca.ErrRoles},
		{name: "client asking impersonator", profile: ca.ProfileClient, roles: role.NewSet(role.Admin, role.Impersonator), want: ca.ErrRoles},
		{name: "server with roles", profile: ca.ProfileServer, roles: role.NewSet(role.Admin), want: ca.ErrRoles},
		{name: "impersonator with roles", profile: ca.ProfileImpersonator, roles: role.NewSet(role.Admin), want: ca.ErrRoles},
		{name: "unknown profile", profile: "ca", want: ca.ErrProfile},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := iss.Issue(ca.Request{CSR: csr, Profile: tt.profile, Roles: tt.roles})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestIssueLifetime(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	csr := parsedCSR(t)

	capped, err := ca.NewIssuer(ca.IssuerConfig{CA: authority, Clock: catest.FixedClock(testutil.Epoch), MaxTTL: map[ca.Profile]time.Duration{ca.ProfileServer: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}

	nearCAEnd := authority.Cert.NotAfter.Add(-time.Hour)

	tests := []struct {
		name      string
		iss       *ca.Issuer
		ttl       time.Duration
		wantLife  time.Duration
		wantAfter time.Time
		wantErr   error
	}{
		{name: "asked", iss: catest.NewIssuer(t, authority, testutil.Epoch), ttl: 2 * time.Hour, wantLife: 2 * time.Hour},
		{name: "above max is cut", iss: capped, ttl: 48 * time.Hour, wantLife: time.Hour},
		{name: "default limited by max", iss: capped, wantLife: time.Hour},
		{name: "short lifetime keeps most of it", iss: catest.NewIssuer(t, authority, testutil.Epoch), ttl: 30 * time.Second, wantLife: 30 * time.Second},
		{name: "never outlives the CA", iss: catest.NewIssuer(t, authority, nearCAEnd), ttl: 24 * time.Hour, wantAfter: authority.Cert.NotAfter},
		{name: "negative", iss: capped, ttl: -time.Second, wantErr: ca.ErrTTL},
		{name: "CA expired", iss: catest.NewIssuer(t, authority, authority.Cert.NotAfter.Add(time.Minute)), wantErr: ca.ErrExpired},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			issued, err := tt.iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer, TTL: tt.ttl})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			cert := issued.Cert
			if tt.wantLife != 0 && cert.NotAfter.Sub(cert.NotBefore) != tt.wantLife {
				t.Fatalf("lifetime = %s, want %s", cert.NotAfter.Sub(cert.NotBefore), tt.wantLife)
			}

			if !tt.wantAfter.IsZero() && !cert.NotAfter.Equal(tt.wantAfter) {
				t.Fatalf("NotAfter = %s, want %s", cert.NotAfter, tt.wantAfter)
			}
		})
	}
}

func TestNewIssuerRefusesLooserMax(t *testing.T) {
	_, err := ca.NewIssuer(ca.IssuerConfig{
		CA:     catest.NewCA(t, ca.Ed25519, testutil.Epoch),
		MaxTTL: map[ca.Profile]time.Duration{ca.ProfileServer: 20 * 365 * 24 * time.Hour},
	})
	if !errors.Is(err, ca.ErrTTL) {
		t.Fatalf("err = %v, want ErrTTL", err)
	}
}

func TestAcceptedSetRotation(t *testing.T) {
	oldCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	newCA := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)
	fromOld := catest.Issue(t, catest.NewIssuer(t, oldCA, testutil.Epoch), catest.Key(t, ca.Ed25519), ca.ProfileClient, 0, role.Admin).Cert
	fromNew := catest.Issue(t, catest.NewIssuer(t, newCA, testutil.Epoch), catest.Key(t, ca.Ed25519), ca.ProfileClient, 0, role.Admin).Cert

	overlap, err := ca.ParseAcceptedSet(append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []*x509.Certificate{fromOld, fromNew} {
		if err := overlap.Verify(c, x509.ExtKeyUsageClientAuth, testutil.Epoch); err != nil {
			t.Fatalf("during overlap: %v", err)
		}
	}

	if err := overlap.Verify(fromOld, x509.ExtKeyUsageServerAuth, testutil.Epoch); err == nil {
		t.Fatal("client certificate verified for server auth")
	}

	after, err := ca.NewAcceptedSet(testutil.Epoch, newCA.Cert, newCA.Cert)
	if err != nil {
		t.Fatal(err)
	}

	if n := len(after.Certificates()); n != 1 {
		t.Fatalf("duplicate CA kept: %d certificates", n)
	}

	if err := after.Verify(fromOld, x509.ExtKeyUsageClientAuth, testutil.Epoch); err == nil {
		t.Fatal("certificate of the removed CA still verifies")
	}

	if _, err := ca.NewAcceptedSet(testutil.Epoch, fromNew); !errors.Is(err, ca.ErrNotCA) {
		t.Fatalf("leaf accepted as CA: %v", err)
	}

	roundTrip, err := ca.ParseAcceptedSet(overlap.PEM(), testutil.Epoch)
	if err != nil || len(roundTrip.Certificates()) != 2 {
		t.Fatalf("PEM round trip: %v", err)
	}
}

func parsedCSR(t *testing.T) *ca.CSR {
	t.Helper()

	pemBytes, err := ca.NewCSR(catest.Key(t, ca.Ed25519), "node", []string{"node.example"})
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.ParseCSR(pemBytes)
	if err != nil {
		t.Fatal(err)
	}

	return csr
}

// TestIssueSignsFromTheParsedCSR: the issuer signs from the request ParseCSR
// parsed and verified, never from its PEM again, and names the key and the
// CA by RFC 7093 key ids.
func TestIssueSignsFromTheParsedCSR(t *testing.T) {
	for _, kt := range ca.KeyTypes() {
		t.Run(string(kt), func(t *testing.T) {
			authority := catest.NewCA(t, kt, testutil.Epoch)
			iss := catest.NewIssuer(t, authority, testutil.Epoch)
			csr := parsedCSR(t)
			csr.PEM = nil

			issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer})
			if err != nil {
				t.Fatalf("issuing from the parsed CSR alone: %v", err)
			}

			var spki struct {
				Algorithm pkix.AlgorithmIdentifier
				PublicKey asn1.BitString
			}

			if _, err = asn1.Unmarshal(csr.Request.RawSubjectPublicKeyInfo, &spki); err != nil {
				t.Fatal(err)
			}

			sum := sha256.Sum256(spki.PublicKey.Bytes)
			if got := issued.Cert.SubjectKeyId; !bytes.Equal(got, sum[:20]) {
				t.Fatalf("subject key id %x, want %x (RFC 7093 method 1)", got, sum[:20])
			}

			if !bytes.Equal(issued.Cert.AuthorityKeyId, authority.Cert.SubjectKeyId) {
				t.Fatalf("authority key id %x, want the CA's %x", issued.Cert.AuthorityKeyId, authority.Cert.SubjectKeyId)
			}

			if !bytes.Equal(issued.PEM, ca.EncodeCertificate(issued.Cert)) {
				t.Fatal("PEM and parsed certificate differ")
			}
		})
	}
}

// TestAcceptedSetPoolShared: the set's pool is built once, so a check of a
// certificate costs no pool, and it verifies what the set accepts and
// nothing else.
func TestAcceptedSetPoolShared(t *testing.T) {
	authority, other := catest.NewCA(t, ca.Ed25519, testutil.Epoch), catest.NewCA(t, ca.Ed25519, testutil.Epoch)

	set, err := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	if set.Pool() != set.Pool() {
		t.Fatal("a new pool at each call")
	}

	if allocs := testing.AllocsPerRun(100, func() { _ = set.Pool() }); allocs != 0 {
		t.Fatalf("Pool allocates %.0f times a call", allocs)
	}

	for _, tt := range []struct {
		name string
		iss  *ca.Issuer
		ok   bool
	}{
		{"the set's CA", catest.NewIssuer(t, authority, testutil.Epoch), true},
		{"another CA", catest.NewIssuer(t, other, testutil.Epoch), false},
	} {
		leaf := catest.Issue(t, tt.iss, catest.Key(t, ca.Ed25519), ca.ProfileServer, 0).Cert

		_, err := leaf.Verify(x509.VerifyOptions{Roots: set.Pool(), CurrentTime: testutil.Epoch, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err == nil) != tt.ok {
			t.Errorf("%s: verified %v (%v), want %v", tt.name, err == nil, err, tt.ok)
		}
	}
}
