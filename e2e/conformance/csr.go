package conformance

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"

	"github.com/aegis-os/aegis/ca"
)

// csrFunc builds the CSR a case sends.
type csrFunc func() ([]byte, error)

// atSource builds the CSR a case sends from the address it calls from.
type atSource func(source string) ([]byte, error)

// anySource is a CSR that does not depend on the caller's address.
func anySource(c csrFunc) atSource { return func(string) ([]byte, error) { return c() } }

// orgAdmin asks for Organization os:admin for the caller's own address.
func orgAdmin(source string) ([]byte, error) {
	return edCSR(&x509.CertificateRequest{
		Subject: pkix.Name{CommonName: source, Organization: []string{"os:admin"}}, IPAddresses: []net.IP{net.ParseIP(source)},
	})()
}

// goodCSR is a request trustd signs for a caller calling from source:
// Ed25519, the source address as its common name and only SAN (what a
// token obtains by default).
func goodCSR(source string) ([]byte, error) {
	return namedCSR(source)
}

// namedCSR is a request with name as its common name and only SAN.
func namedCSR(name string) ([]byte, error) {
	key, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		return nil, err
	}

	return ca.NewCSR(key, name, []string{name})
}

// rawCSR signs tmpl with key, with no checks, so cases can send what
// trustd must refuse.
func rawCSR(key crypto.Signer, tmpl *x509.CertificateRequest) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("creating a CSR: %w", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// edCSR is rawCSR with a new Ed25519 key.
func edCSR(tmpl *x509.CertificateRequest) csrFunc {
	return func() ([]byte, error) {
		key, err := ca.GenerateKey(ca.Ed25519, nil)
		if err != nil {
			return nil, err
		}

		return rawCSR(key, tmpl)
	}
}

func named(name string) pkix.Name { return pkix.Name{CommonName: name} }

// csrWithKey is rawCSR with a key newKey makes.
func csrWithKey(newKey func() (crypto.Signer, error)) csrFunc {
	return func() ([]byte, error) {
		key, err := newKey()
		if err != nil {
			return nil, err
		}

		return rawCSR(key, &x509.CertificateRequest{Subject: named("conformance-key"), DNSNames: []string{"conformance-key"}})
	}
}

func rsa1024() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 1024) }

func p224() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P224(), rand.Reader) }

// badSignature is a good request with one bit of its signature flipped.
func badSignature() ([]byte, error) {
	good, err := namedCSR("conformance-badsig")
	if err != nil {
		return nil, err
	}

	block, _ := pem.Decode(good)
	der := bytes.Clone(block.Bytes)
	der[len(der)-1] ^= 0x01

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// caRequest asks for CA:TRUE in a basic constraints extension.
func caRequest() ([]byte, error) {
	val, err := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{IsCA: true})
	if err != nil {
		return nil, err
	}

	ext := pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: val}

	return edCSR(&x509.CertificateRequest{Subject: named("conformance-ca"), ExtraExtensions: []pkix.Extension{ext}})()
}

// manySANs names n hosts.
func manySANs(n int) csrFunc {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("conformance-%d.example", i)
	}

	return edCSR(&x509.CertificateRequest{Subject: named("conformance-many"), DNSNames: names})
}

// bytesOf is a CSR of fixed content.
func bytesOf(b []byte) csrFunc { return func() ([]byte, error) { return b, nil } }

// oversized is a PEM-framed body of n bytes, as a CSR far too big.
func oversized(n int) csrFunc {
	return func() ([]byte, error) {
		return append(append([]byte("-----BEGIN CERTIFICATE REQUEST-----\n"), bytes.Repeat([]byte("A"), n)...),
			"\n-----END CERTIFICATE REQUEST-----\n"...), nil
	}
}

var (
	csrWildcard  = edCSR(&x509.CertificateRequest{Subject: named("conformance-wild"), DNSNames: []string{"*.conformance.example"}})
	csrWildCN    = edCSR(&x509.CertificateRequest{Subject: named("*.conformance.example")})
	csrEmail     = edCSR(&x509.CertificateRequest{Subject: named("conformance-mail"), EmailAddresses: []string{"root@conformance.example"}})
	csrURI       = edCSR(&x509.CertificateRequest{Subject: named("conformance-uri"), URIs: []*url.URL{{Scheme: "spiffe", Host: "aegis", Path: "/os/admin"}}})
	csrOutside   = edCSR(&x509.CertificateRequest{Subject: named("conformance-1.example"), DNSNames: []string{"conformance-1.example", "evil.example"}})
	csrOutsideIP = edCSR(&x509.CertificateRequest{Subject: named("conformance-1.example"), IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
	csrInside    = edCSR(&x509.CertificateRequest{Subject: named("conformance-1.example"), DNSNames: []string{"conformance-1.example"}, IPAddresses: []net.IP{net.ParseIP("127.8.0.77")}})
	csrUnspecIP  = edCSR(&x509.CertificateRequest{Subject: named("conformance-ip"), IPAddresses: []net.IP{net.IPv4zero}})
)
