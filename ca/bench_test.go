package ca_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// BenchmarkIssue measures the whole issuing path after ParseCSR: the
// template from the profile, x509.CreateCertificate (which verifies the
// signature it made), one parse of the result and the re-check of its fields.
func BenchmarkIssue(b *testing.B) {
	for _, kt := range ca.KeyTypes() {
		b.Run(string(kt), func(b *testing.B) {
			authority := catest.NewCA(b, kt, testutil.Epoch)
			iss := catest.NewIssuer(b, authority, testutil.Epoch)
			csr := benchCSR(b, kt)

			b.ReportAllocs()

			for b.Loop() {
				if _, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIssueRaw is the lower bound of BenchmarkIssue: x509.CreateCertificate
// on the template the server profile produces, with nothing around it.
func BenchmarkIssueRaw(b *testing.B) {
	for _, kt := range ca.KeyTypes() {
		b.Run(string(kt), func(b *testing.B) {
			authority := catest.NewCA(b, kt, testutil.Epoch)
			csr := benchCSR(b, kt)
			tmpl := &x509.Certificate{
				Subject:               pkix.Name{CommonName: csr.Request.Subject.CommonName},
				NotBefore:             testutil.Epoch,
				NotAfter:              testutil.Epoch.Add(24 * time.Hour),
				KeyUsage:              x509.KeyUsageDigitalSignature,
				ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				BasicConstraintsValid: true,
				DNSNames:              csr.Request.DNSNames,
				IPAddresses:           csr.Request.IPAddresses,
			}

			b.ReportAllocs()

			for b.Loop() {
				serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
				if err != nil {
					b.Fatal(err)
				}

				tmpl.SerialNumber = serial

				if _, err := x509.CreateCertificate(rand.Reader, tmpl, authority.Cert, csr.Request.PublicKey, authority.Key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseCSR measures the checks every request passes before signing.
func BenchmarkParseCSR(b *testing.B) {
	for _, kt := range ca.KeyTypes() {
		b.Run(string(kt), func(b *testing.B) {
			csrPEM := benchCSR(b, kt).PEM

			b.ReportAllocs()

			for b.Loop() {
				if _, err := ca.ParseCSR(csrPEM); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchCSR(b *testing.B, kt ca.KeyType) *ca.CSR {
	b.Helper()

	pemBytes, err := ca.NewCSR(catest.Key(b, kt), "node-1", []string{"node-1", "127.0.0.2"})
	if err != nil {
		b.Fatal(err)
	}

	csr, err := ca.ParseCSR(pemBytes)
	if err != nil {
		b.Fatal(err)
	}

	return csr
}
