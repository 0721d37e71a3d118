package apidtest

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

// PKI is a test cluster's OS CA and the certificates it issues. Clients
// outside apid (the Talos client) check certificates against the real
// clock, so everything is valid around the real time, not a fake one.
type PKI struct {
	CA      *ca.CA
	issuer  *ca.Issuer
	net     nodeNet
	members members
}

// Pair is a certificate and its key, in PEM.
type Pair struct {
	Cert *x509.Certificate
	CertPEM,
	KeyPEM []byte
}

// NewPKI makes a CA valid from three days ago, so that certificates
// already expired can be issued by it too.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()

	start := time.Now().Add(-72 * time.Hour)
	c := catest.NewCA(tb, ca.Ed25519, start)

	return &PKI{CA: c, issuer: catest.NewIssuer(tb, c, time.Now())}
}

// Issuer returns the PKI's issuer, for code that issues certificates itself.
func (p *PKI) Issuer() *ca.Issuer { return p.issuer }

// Accepted returns the set holding the PKI's CA.
func (p *PKI) Accepted(tb testing.TB) *ca.AcceptedSet {
	tb.Helper()

	set, err := ca.NewAcceptedSet(time.Now(), p.CA.Cert)
	if err != nil {
		tb.Fatalf("accepted set: %v", err)
	}

	return set
}

// Server issues a node's server certificate for hosts (IP addresses or names).
func (p *PKI) Server(tb testing.TB, hosts ...string) Pair {
	tb.Helper()

	return p.issue(tb, p.issuer, ca.ProfileServer, 0, hosts)
}

// Client issues a client certificate holding roles.
func (p *PKI) Client(tb testing.TB, roles ...role.Role) Pair {
	tb.Helper()

	return p.issue(tb, p.issuer, ca.ProfileClient, time.Hour, nil, roles...)
}

// Impersonator issues a node's os:impersonator client certificate.
func (p *PKI) Impersonator(tb testing.TB) Pair {
	tb.Helper()

	return p.issue(tb, p.issuer, ca.ProfileImpersonator, 0, nil)
}

// ExpiredClient issues a client certificate that expired two days ago.
func (p *PKI) ExpiredClient(tb testing.TB, roles ...role.Role) Pair {
	tb.Helper()

	past := catest.NewIssuer(tb, p.CA, time.Now().Add(-48*time.Hour))

	return p.issue(tb, past, ca.ProfileClient, time.Hour, nil, roles...)
}

// NoUsageClient makes, bypassing the issuer, a client certificate with
// roles and no extended key usage at all: crypto/tls takes it as valid for
// any use, Aegis must not.
func (p *PKI) NoUsageClient(tb testing.TB, roles ...role.Role) Pair {
	tb.Helper()

	key := catest.Key(tb, ca.Ed25519)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "no-usage", Organization: role.Strings(roles)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA.Cert, key.Public(), p.CA.Key)
	if err != nil {
		tb.Fatalf("creating certificate: %v", err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}

	keyPEM, err := ca.EncodeKey(key)
	if err != nil {
		tb.Fatal(err)
	}

	return Pair{Cert: cert, CertPEM: ca.EncodeCertificate(cert), KeyPEM: keyPEM}
}

func (p *PKI) issue(tb testing.TB, iss *ca.Issuer, profile ca.Profile, ttl time.Duration, hosts []string, roles ...role.Role) Pair {
	tb.Helper()

	key := catest.Key(tb, ca.Ed25519)

	csrPEM, err := ca.NewCSR(key, "aegis-test", hosts)
	if err != nil {
		tb.Fatalf("CSR: %v", err)
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		tb.Fatalf("CSR: %v", err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: profile, Roles: role.NewSet(roles...), TTL: ttl})
	if err != nil {
		tb.Fatalf("issuing a %s certificate: %v", profile, err)
	}

	keyPEM, err := ca.EncodeKey(key)
	if err != nil {
		tb.Fatalf("encoding key: %v", err)
	}

	return Pair{Cert: issued.Cert, CertPEM: issued.PEM, KeyPEM: keyPEM}
}

// KeyPair returns the pair as a hot-swappable certs.KeyPair.
func (c Pair) KeyPair(tb testing.TB) *certs.KeyPair {
	tb.Helper()

	kp, err := certs.NewKeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		tb.Fatalf("key pair: %v", err)
	}

	return kp
}

// TLS returns the pair as a tls.Certificate.
func (c Pair) TLS(tb testing.TB) tls.Certificate {
	tb.Helper()

	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		tb.Fatalf("tls pair: %v", err)
	}

	return cert
}

// Write saves the pair as dir/name.crt and dir/name.key and returns the paths.
func (c Pair) Write(tb testing.TB, dir, name string) (certPath, keyPath string) {
	tb.Helper()

	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, data := range map[string][]byte{certPath: c.CertPEM, keyPath: c.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatalf("writing %s: %v", path, err)
		}
	}

	return certPath, keyPath
}

// ClientTLS is a client's TLS config: it trusts the PKI's CA and presents
// pair; a zero Pair presents no certificate.
func (p *PKI) ClientTLS(tb testing.TB, pair Pair) *tls.Config {
	tb.Helper()

	roots := x509.NewCertPool()
	roots.AddCert(p.CA.Cert)

	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	if pair.Cert != nil {
		cfg.Certificates = []tls.Certificate{pair.TLS(tb)}
	}

	return cfg
}
