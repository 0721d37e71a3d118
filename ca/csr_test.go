package ca_test

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
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestParseCSRRefusals(t *testing.T) {
	ed := catest.Key(t, ca.Ed25519)
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}

	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)

	caExt := basicConstraintsCA(t)
	many := make([]string, ca.MaxSANs+1)
	for i := range many {
		many[i] = fmt.Sprintf("n%d.example", i)
	}

	tests := []struct {
		name string
		pem  []byte
		want error
	}{
		{name: "garbage bytes", pem: []byte("\x00\x01garbage"), want: ca.ErrBadPEM},
		{name: "certificate block", pem: catest.NewCA(t, ca.Ed25519, testutil.Epoch).CertPEM, want: ca.ErrBadPEM},
		{name: "garbage DER", pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}}), want: ca.ErrBadCSR},
		{name: "oversized", pem: bytes.Repeat([]byte("A"), ca.MaxPEMSize+1), want: ca.ErrTooLarge},
		{name: "bad signature", pem: badSignature(t, catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: []string{"node"}})), want: ca.ErrCSRSignature},
		{name: "RSA-1024", pem: catest.CSR(t, rsa1024, &x509.CertificateRequest{}), want: ca.ErrKeyType},
		{name: "P-224", pem: catest.CSR(t, p224, &x509.CertificateRequest{}), want: ca.ErrKeyType},
		{name: "CA:true", pem: catest.CSR(t, ed, &x509.CertificateRequest{ExtraExtensions: []pkix.Extension{caExt}}), want: ca.ErrCARequested},
		{name: "bad signature with a refused key", pem: badSignature(t, catest.CSR(t, rsa1024, &x509.CertificateRequest{})), want: ca.ErrKeyType},
		{name: "wildcard DNS", pem: catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: []string{"*.example.com"}}), want: ca.ErrWildcardSAN},
		{name: "wildcard common name", pem: catest.CSR(t, ed, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "*.example.com"}}), want: ca.ErrWildcardSAN},
		{name: "e-mail SAN", pem: catest.CSR(t, ed, &x509.CertificateRequest{EmailAddresses: []string{"root@example.com"}}), want: ca.ErrEmailSAN},
		{name: "URI SAN", pem: catest.CSR(t, ed, &x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "aegis", Path: "/admin"}}}), want: ca.ErrURISAN},
		{name: "too many SANs", pem: catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: many}), want: ca.ErrTooManySANs},
		{name: "bad DNS label", pem: catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: []string{"bad_name.example"}}), want: ca.ErrBadSAN},
		{name: "unspecified IP", pem: catest.CSR(t, ed, &x509.CertificateRequest{IPAddresses: []net.IP{net.IPv4zero}}), want: ca.ErrBadSAN},
		{name: "long common name", pem: catest.CSR(t, ed, &x509.CertificateRequest{Subject: pkix.Name{CommonName: strings.Repeat("a", 65)}}), want: ca.ErrBadSubject},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ca.ParseCSR(tt.pem)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseCSRAccepts(t *testing.T) {
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)

	for name, key := range map[string]crypto.Signer{
		"ed25519":  catest.Key(t, ca.Ed25519),
		"P-256":    catest.Key(t, ca.ECDSAP256),
		"P-384":    p384,
		"RSA-2048": rsa2048,
	} {
		t.Run(name, func(t *testing.T) {
			csrPEM, err := ca.NewCSR(key, "node-1", []string{"node-1.example", "10.5.0.2", "fd00::2"})
			if err != nil {
				t.Fatal(err)
			}

			csr, err := ca.ParseCSR(csrPEM)
			if err != nil {
				t.Fatal(err)
			}

			if got := strings.Join(csr.Hosts(), ","); got != "node-1.example,10.5.0.2,fd00::2" {
				t.Fatalf("hosts = %s", got)
			}
		})
	}
}

func basicConstraintsCA(t *testing.T) pkix.Extension {
	t.Helper()

	val, err := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{IsCA: true})
	if err != nil {
		t.Fatal(err)
	}

	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: val}
}

// badSignature flips a bit in the last byte of the CSR's signature.
func badSignature(t *testing.T, csrPEM []byte) []byte {
	t.Helper()

	block, _ := pem.Decode(csrPEM)
	der := append([]byte{}, block.Bytes...)
	der[len(der)-1] ^= 0x01

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func FuzzParseCSR(f *testing.F) {
	key := catest.Key(f, ca.Ed25519)
	good, err := ca.NewCSR(key, "node", []string{"node.example", "127.0.0.1"})
	if err != nil {
		f.Fatal(err)
	}

	f.Add(good)
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte{})

	iss := catest.NewIssuer(f, catest.NewCA(f, ca.Ed25519, testutil.Epoch), testutil.Epoch)

	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := ca.ParseCSR(data)
		if err != nil {
			var caErr *ca.Error
			if !errors.As(err, &caErr) {
				t.Fatalf("refusal is not a *ca.Error: %v", err)
			}

			return
		}

		// Whatever passed the checks must sign, and the issued certificate
		// must hold none of the CSR's authority claims.
		issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer})
		if err != nil {
			t.Fatalf("accepted CSR failed to issue: %v", err)
		}

		if issued.Cert.IsCA || len(issued.Cert.Subject.Organization) != 0 || len(issued.Cert.EmailAddresses) != 0 || len(issued.Cert.URIs) != 0 {
			t.Fatalf("issued certificate carries CSR authority: %+v", issued.Cert.Subject)
		}
	})
}
