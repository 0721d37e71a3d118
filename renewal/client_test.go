package renewal

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestClientRenewalDue(t *testing.T) {
	cert := certValid(testutil.Epoch, 30*time.Hour)

	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{name: "fresh", now: testutil.Epoch, want: false},
		{name: "half-life", now: testutil.Epoch.Add(15 * time.Hour), want: false},
		{name: "just before two thirds", now: testutil.Epoch.Add(20*time.Hour - time.Nanosecond), want: false},
		{name: "a third left", now: testutil.Epoch.Add(20 * time.Hour), want: true},
		{name: "last second", now: testutil.Epoch.Add(30 * time.Hour), want: true},
		{name: "expired cannot renew", now: testutil.Epoch.Add(30*time.Hour + time.Second), want: false},
		{name: "not yet valid", now: testutil.Epoch.Add(-time.Hour), want: false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClientRenewalDue(tt.now, cert); got != tt.want {
				t.Fatalf("ClientRenewalDue(%s) = %v, want %v", tt.now, got, tt.want)
			}
		})
	}
}

func TestCheckClientCertificateTime(t *testing.T) {
	cert := certValid(testutil.Epoch, time.Hour)

	tests := []struct {
		name string
		now  time.Time
		want string
	}{
		{name: "valid", now: testutil.Epoch.Add(time.Minute)},
		{name: "expired", now: testutil.Epoch.Add(3 * time.Hour), want: "client certificate expired at 2030-01-01T13:00:00Z (2h0m0s ago)"},
		{name: "not yet valid", now: testutil.Epoch.Add(-90 * time.Second), want: "not valid until 2030-01-01T12:00:00Z (in 1m30s; is this machine's clock behind?)"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckClientCertificateTime(tt.now, cert)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}

				return
			}

			var te *CertificateTimeError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a CertificateTimeError containing %q", err, tt.want)
			}
		})
	}
}

func TestClientRenewalCheck(t *testing.T) {
	now := testutil.Epoch
	authority := catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))
	other := catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))
	iss := catest.NewIssuer(t, authority, now)

	old := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Operator, role.Reader)

	r, err := NewClientRenewal(old.Cert, nil)
	if err != nil {
		t.Fatal(err)
	}

	if r.TTL != time.Hour {
		t.Fatalf("TTL asked = %s, want the old lifetime", r.TTL)
	}

	issue := func(i *ca.Issuer, ttl time.Duration, roles ...role.Role) []byte {
		csr, err := ca.ParseCSR(r.CSR)
		if err != nil {
			t.Fatal(err)
		}

		issued, err := i.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: role.NewSet(roles...), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}

		return issued.PEM
	}

	tests := []struct {
		name string
		crt  []byte
		cas  []byte
		want string
	}{
		{name: "good", crt: issue(iss, time.Hour, role.Reader, role.Operator), cas: authority.CertPEM},
		{name: "shorter is fine", crt: issue(iss, time.Minute, role.Reader, role.Operator), cas: authority.CertPEM},
		{name: "longer than asked", crt: issue(iss, 2*time.Hour, role.Reader, role.Operator), cas: authority.CertPEM, want: "more than"},
		{name: "other roles", crt: issue(iss, time.Hour, role.Admin), cas: authority.CertPEM, want: "roles"},
		{name: "other key", crt: old.PEM, cas: authority.CertPEM, want: "new key"},
		{name: "unknown CA", crt: issue(catest.NewIssuer(t, other, now), time.Hour, role.Reader, role.Operator), cas: authority.CertPEM, want: "does not chain to a CA the context trusts"},
		{name: "no CAs", crt: issue(iss, time.Hour, role.Reader, role.Operator), want: "the context's CAs"},
		{name: "other common name", crt: issueAs(t, iss, r, "mallory", time.Hour, role.Reader, role.Operator), cas: authority.CertPEM, want: `is for "mallory"`},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := r.Check(tt.crt, tt.cas, now)
			if tt.want == "" {
				if err != nil || cert == nil {
					t.Fatalf("Check: %v", err)
				}

				return
			}

			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// issueAs signs the renewal's key under another common name.
func issueAs(t *testing.T, iss *ca.Issuer, r *ClientRenewal, cn string, ttl time.Duration, roles ...role.Role) []byte {
	t.Helper()

	key, err := ca.ParseKey(r.KeyPEM())
	if err != nil {
		t.Fatal(err)
	}

	csrPEM, err := ca.NewCSR(key, cn, nil)
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: role.NewSet(roles...), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}

	return issued.PEM
}

func TestNewClientRenewalKeepsKeyTypeAndName(t *testing.T) {
	now := testutil.Epoch
	iss := catest.NewIssuer(t, catest.NewCA(t, ca.ECDSAP256, now.Add(-time.Hour)), now)
	old := catest.Issue(t, iss, catest.Key(t, ca.ECDSAP256), ca.ProfileClient, time.Hour, role.Admin)

	r, err := NewClientRenewal(old.Cert, nil)
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.ParseCSR(r.CSR)
	if err != nil {
		t.Fatal(err)
	}

	if csr.Request.PublicKeyAlgorithm != x509.ECDSA || csr.Request.Subject.CommonName != "test" || len(csr.Hosts()) != 0 {
		t.Fatalf("CSR: algorithm %v, CN %q, hosts %v", csr.Request.PublicKeyAlgorithm, csr.Request.Subject.CommonName, csr.Hosts())
	}

	if _, err := ca.ParseKey(r.KeyPEM()); err != nil {
		t.Fatal(err)
	}
}
