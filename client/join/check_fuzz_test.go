package join

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/token"
)

// FuzzCheckAnswer covers trustd's answer as a joining node reads it: any
// CA bundle and certificate are refused, or the certificate is for the
// node's key and verifies, as a server certificate, against CAs only.
func FuzzCheckAnswer(f *testing.F) {
	authority := catest.NewCA(f, ca.Ed25519, testutil.Epoch)
	other := catest.NewCA(f, ca.Ed25519, testutil.Epoch)
	iss := catest.NewIssuer(f, authority, testutil.Epoch)
	key := catest.Key(f, ca.Ed25519)

	server := catest.Issue(f, iss, key, ca.ProfileServer, 0)
	client := catest.Issue(f, iss, key, ca.ProfileClient, 0, "os:reader")
	stranger := catest.Issue(f, iss, catest.Key(f, ca.Ed25519), ca.ProfileServer, 0)

	f.Add(authority.CertPEM, server.PEM)
	f.Add(append(bytes.Clone(other.CertPEM), authority.CertPEM...), server.PEM)
	f.Add(other.CertPEM, server.PEM)
	f.Add(authority.CertPEM, client.PEM)
	f.Add(authority.CertPEM, stranger.PEM)
	f.Add(server.PEM, server.PEM)
	f.Add([]byte{}, []byte{})

	c, err := New(Config{
		Endpoints: []string{"127.8.9.9"}, Token: mustToken(f), CAs: mustSet(f, authority), CA: authority.Cert,
		Clock: clock.NewFake(testutil.Epoch),
	})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, caPEM, crtPEM []byte) {
		res, err := c.check(key, caPEM, crtPEM)
		if err != nil {
			return
		}

		pub, _ := key.Public().(interface{ Equal(crypto.PublicKey) bool })
		if !pub.Equal(res.Certificate.PublicKey) {
			t.Fatal("accepted a certificate for another key")
		}

		for _, cert := range res.CAs.Certificates() {
			if !cert.IsCA {
				t.Fatal("accepted a CA bundle holding a certificate that is not a CA")
			}
		}

		if err = res.CAs.Verify(res.Certificate, x509.ExtKeyUsageServerAuth, testutil.Epoch); err != nil {
			t.Fatalf("accepted a certificate that does not verify: %v", err)
		}
	})
}

func mustToken(tb testing.TB) token.Token {
	tok, err := token.Parse("abcdef.0123456789abcdef")
	if err != nil {
		tb.Fatal(err)
	}

	return tok
}

func mustSet(tb testing.TB, authority *ca.CA) *ca.AcceptedSet {
	set, err := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
	if err != nil {
		tb.Fatal(err)
	}

	return set
}
