package ca_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	"github.com/zmap/zlint/v3/lint"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
)

// deliberate lists the zlint findings Aegis's certificates show on
// purpose, with the reason. All come from the rules of the public web PKI
// (CA/Browser Forum Baseline Requirements): Aegis runs a private PKI of
// short-lived certificates for node names and addresses, which no browser
// trusts. A finding of RFC 5280 (or any other source) at error level
// fails the test; so does any finding not listed here, and any listed one
// that no longer shows.
var deliberate = map[string]string{
	// Ed25519 is the default key type; the BR and the Mozilla policy
	// predate it.
	"e_algorithm_identifier_improper_encoding": "Ed25519 keys (RFC 8410) are Aegis's default",
	"e_signature_algorithm_not_supported":      "Ed25519 signatures (RFC 8410) are Aegis's default",
	// Nodes are named by their host names and addresses on a private
	// network, not by public DNS names.
	"e_dnsname_not_valid_tld":        "node names (cp-1) are not public DNS names",
	"e_ext_san_contains_reserved_ip": "nodes are reached on private addresses",
	// No revocation: certificates live hours to a day and are replaced,
	// not revoked; nothing fetches CRLs or asks OCSP.
	"e_sub_cert_aia_missing":                         "no OCSP or CA issuer URL: short-lived certificates, no revocation",
	"e_sub_cert_aia_does_not_contain_ocsp_url":       "no OCSP: short-lived certificates, no revocation",
	"w_sub_cert_aia_does_not_contain_issuing_ca_url": "the CA certificate is distributed with the node's config, not fetched",
	"e_ca_crl_sign_not_set":                          "the CA signs no CRLs: short-lived certificates, no revocation",
	// No certificate policies: there is no CPS to point to.
	"e_sub_cert_certificate_policies_missing": "a private PKI without a certification practice statement",
	"e_sub_cert_cert_policy_empty":            "a private PKI without a certification practice statement",
	// The CA's subject names the cluster, not a country's legal entity.
	"e_ca_country_name_missing": "the CA's subject names the cluster (Organization, CommonName)",
	// The CA is a root that signs leaves only; pathLen 0 says so.
	"w_root_ca_basic_constraints_path_len_constraint_field_present": "pathLen 0: the CA signs leaves only, never an intermediate",
}

// TestIssuedCertificatesLint runs zlint over a certificate of every
// profile and the CA, for each key type.
func TestIssuedCertificatesLint(t *testing.T) {
	seen := map[string]bool{}

	for _, kt := range ca.KeyTypes() {
		now := time.Now()
		authority := catest.NewCA(t, kt, now)
		iss := catest.NewIssuer(t, authority, now)

		lintOne(t, string(kt)+" CA", authority.Cert, seen)

		for _, p := range ca.Profiles() {
			lintOne(t, string(kt)+" "+string(p), issue(t, iss, kt, p), seen)
		}
	}

	for name := range deliberate {
		if !seen[name] {
			t.Errorf("%s is listed as deliberate but no certificate shows it: drop it from the list", name)
		}
	}
}

func issue(t *testing.T, iss *ca.Issuer, kt ca.KeyType, p ca.Profile) *x509.Certificate {
	t.Helper()

	var roles []role.Role
	if p == ca.ProfileClient {
		roles = []role.Role{role.Admin}
	}

	csr, err := ca.ParseCSR(catest.CSR(t, catest.Key(t, kt), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "cp-1"}, DNSNames: []string{"cp-1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
	}))
	if err != nil {
		t.Fatal(err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: p, Roles: role.NewSet(roles...)})
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}

	return issued.Cert
}

// lintOne fails on an error of any source but the public web's and on
// any warning or error not in deliberate.
func lintOne(t *testing.T, what string, c *x509.Certificate, seen map[string]bool) {
	t.Helper()

	zc, err := zx509.ParseCertificate(c.Raw)
	if err != nil {
		t.Fatalf("%s: zcrypto cannot parse it: %v", what, err)
	}

	registry := lint.GlobalRegistry()

	for name, r := range zlint.LintCertificateEx(zc, registry).Results {
		if r.Status != lint.Warn && r.Status != lint.Error && r.Status != lint.Fatal {
			continue
		}

		source := registry.ByName(name).Source
		_, listed := deliberate[name]
		web := source == lint.CABFBaselineRequirements || source == lint.MozillaRootStorePolicy

		switch {
		case !listed:
			t.Errorf("%s: %s %s (%s) %s", what, r.Status, name, source, r.Details)
		case r.Status != lint.Warn && !web:
			t.Errorf("%s: %s %s (%s) may not be waived: %s", what, r.Status, name, source, r.Details)
		default:
			seen[name] = true
		}
	}
}
