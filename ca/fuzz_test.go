package ca_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// FuzzParseCertificates covers the CA bundles a joining node reads from
// trustd's answer and the accepted CAs a node reads from its config: any
// input is refused as a *ca.Error or yields certificates that encode back
// to what was read.
func FuzzParseCertificates(f *testing.F) {
	a := catest.NewCA(f, ca.Ed25519, testutil.Epoch)
	b := catest.NewCA(f, ca.ECDSAP256, testutil.Epoch)
	leaf := catest.Issue(f, catest.NewIssuer(f, a, testutil.Epoch), catest.Key(f, ca.Ed25519), ca.ProfileServer, 0)

	f.Add(a.CertPEM)
	f.Add(append(append([]byte{}, a.CertPEM...), b.CertPEM...))
	f.Add(leaf.PEM)
	f.Add(append(append([]byte{}, a.CertPEM...), "trailing"...))
	f.Add(a.KeyPEM)
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := ca.ParseCertificates(data)
		if err != nil {
			var refusal *ca.Error
			if !errors.As(err, &refusal) {
				t.Fatalf("refusal is not a *ca.Error: %v", err)
			}

			return
		}

		for _, c := range certs {
			again, err := ca.ParseCertificate(ca.EncodeCertificate(c))
			if err != nil || !again.Equal(c) {
				t.Fatalf("certificate does not survive encoding: %v", err)
			}
		}

		set, err := ca.ParseAcceptedSet(data, testutil.Epoch)
		if err != nil {
			return
		}

		for _, c := range set.Certificates() {
			if !c.IsCA {
				t.Fatal("accepted set holds a certificate that is not a CA")
			}
		}

		if _, err = ca.ParseAcceptedSet(set.PEM(), testutil.Epoch); err != nil {
			t.Fatalf("an accepted set's PEM does not parse back: %v", err)
		}
	})
}

// FuzzParseKey covers the keys of configs, bundles and key files: any
// input is refused as a *ca.Error or yields a key that encodes back to
// the same key.
func FuzzParseKey(f *testing.F) {
	for _, kt := range ca.KeyTypes() {
		pemBytes, err := ca.EncodeKey(catest.Key(f, kt))
		if err != nil {
			f.Fatal(err)
		}

		f.Add(pemBytes)
	}

	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nMAA=\n-----END RSA PRIVATE KEY-----\n"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := ca.ParseKey(data)
		if err != nil {
			var refusal *ca.Error
			if !errors.As(err, &refusal) {
				t.Fatalf("refusal is not a *ca.Error: %v", err)
			}

			return
		}

		encoded, err := ca.EncodeKey(key)
		if err != nil {
			return // a key type PKCS #8 cannot carry is still a parsed key
		}

		again, err := ca.ParseKey(encoded)
		if err != nil {
			t.Fatalf("encoded key does not parse back: %v", err)
		}

		a, _ := ca.EncodeKey(again)
		if !bytes.Equal(a, encoded) {
			t.Fatal("key changed through encoding")
		}
	})
}
