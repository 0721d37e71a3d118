package ca_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestGenerate(t *testing.T) {
	for _, kt := range ca.KeyTypes() {
		t.Run(string(kt), func(t *testing.T) {
			c, err := ca.Generate(ca.Config{KeyType: kt, Organization: "aegis", Clock: clock.NewFake(testutil.Epoch)})
			if err != nil {
				t.Fatal(err)
			}

			cert := c.Cert
			if !cert.IsCA || !cert.BasicConstraintsValid || cert.MaxPathLen != 0 || !cert.MaxPathLenZero {
				t.Fatalf("basic constraints: CA=%v valid=%v pathlen=%d", cert.IsCA, cert.BasicConstraintsValid, cert.MaxPathLen)
			}

			if cert.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature {
				t.Fatalf("key usage = %v", cert.KeyUsage)
			}

			if bits := cert.SerialNumber.BitLen(); bits == 0 || bits > 128 {
				t.Fatalf("serial has %d bits", bits)
			}

			if len(cert.SubjectKeyId) != 20 {
				t.Fatalf("subject key id has %d bytes", len(cert.SubjectKeyId))
			}

			if got := cert.NotAfter.Sub(cert.NotBefore); got != ca.CAValidity {
				t.Fatalf("validity = %s, want %s", got, ca.CAValidity)
			}

			if err := cert.CheckSignatureFrom(cert); err != nil {
				t.Fatalf("self-signature: %v", err)
			}

			if got, _ := ca.KeyTypeOf(cert.PublicKey); got != kt {
				t.Fatalf("key type = %s, want %s", got, kt)
			}

			if _, err := ca.Parse(c.CertPEM, c.KeyPEM, testutil.Epoch); err != nil {
				t.Fatalf("generated CA does not load: %v", err)
			}
		})
	}
}

func TestGenerateSerialsDiffer(t *testing.T) {
	a := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	b := catest.NewCA(t, ca.Ed25519, testutil.Epoch)

	if a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 {
		t.Fatal("two CAs share a serial")
	}
}

func TestParseRefusals(t *testing.T) {
	good := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	other := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)
	leaf := catest.Issue(t, catest.NewIssuer(t, good, testutil.Epoch), catest.Key(t, ca.Ed25519), ca.ProfileServer, 0)

	tests := []struct {
		name    string
		certPEM []byte
		keyPEM  []byte
		now     time.Time
		want    error
	}{
		{name: "garbage certificate", certPEM: []byte("not pem"), keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrBadPEM},
		{name: "truncated certificate", certPEM: good.CertPEM[:len(good.CertPEM)/2], keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrBadPEM},
		{name: "key block as certificate", certPEM: good.KeyPEM, keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrBadPEM},
		{name: "corrupt DER", certPEM: corruptDER(good.CertPEM), keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrBadCertificate},
		{name: "garbage key", certPEM: good.CertPEM, keyPEM: []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), now: testutil.Epoch, want: ca.ErrBadKey},
		{name: "certificate as key", certPEM: good.CertPEM, keyPEM: good.CertPEM, now: testutil.Epoch, want: ca.ErrBadPEM},
		{name: "key of another CA", certPEM: good.CertPEM, keyPEM: other.KeyPEM, now: testutil.Epoch, want: ca.ErrKeyMismatch},
		{name: "expired", certPEM: good.CertPEM, keyPEM: good.KeyPEM, now: good.Cert.NotAfter.Add(time.Second), want: ca.ErrExpired},
		{name: "not yet valid", certPEM: good.CertPEM, keyPEM: good.KeyPEM, now: good.Cert.NotBefore.Add(-time.Second), want: ca.ErrNotYetValid},
		{name: "leaf is not a CA", certPEM: leaf.PEM, keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrNotCA},
		{name: "two certificates", certPEM: append(append([]byte{}, good.CertPEM...), other.CertPEM...), keyPEM: good.KeyPEM, now: testutil.Epoch, want: ca.ErrBadPEM},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ca.Parse(tt.certPEM, tt.keyPEM, tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}

			var caErr *ca.Error
			if !errors.As(err, &caErr) || caErr.Detail == "" {
				t.Fatalf("err %v is not a detailed *ca.Error", err)
			}
		})
	}
}

func TestParseKeyForms(t *testing.T) {
	ed := catest.Key(t, ca.Ed25519).(ed25519.PrivateKey)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)

	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}

		return der
	}
	sec1, _ := x509.MarshalECPrivateKey(ec)

	tests := []struct {
		name  string
		block *pem.Block
	}{
		{name: "PKCS8 ed25519", block: &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8(ed)}},
		{name: "Talos ED25519 PRIVATE KEY", block: &pem.Block{Type: "ED25519 PRIVATE KEY", Bytes: pkcs8(ed)}},
		{name: "SEC1 EC PRIVATE KEY", block: &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}},
		{name: "PKCS1 RSA PRIVATE KEY", block: &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ca.ParseKey(pem.EncodeToMemory(tt.block))
			if err != nil {
				t.Fatal(err)
			}

			again, err := ca.EncodeKey(k)
			if err != nil {
				t.Fatal(err)
			}

			if _, err := ca.ParseKey(again); err != nil {
				t.Fatalf("re-encoded key does not parse: %v", err)
			}
		})
	}
}

func TestWriteFilesModesAndNoOverwrite(t *testing.T) {
	c := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")

	if err := c.WriteFiles(crt, key, false); err != nil {
		t.Fatal(err)
	}

	for path, want := range map[string]os.FileMode{crt: 0o644, key: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}

		if st.Mode().Perm() != want {
			t.Fatalf("%s mode = %v, want %v", filepath.Base(path), st.Mode().Perm(), want)
		}
	}

	if err := c.WriteFiles(crt, key, false); err == nil {
		t.Fatal("second write without overwrite succeeded")
	}

	loaded, err := ca.LoadFiles(crt, key, testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	if !loaded.Cert.Equal(c.Cert) {
		t.Fatal("loaded CA differs from the saved one")
	}
}

func corruptDER(certPEM []byte) []byte {
	block, _ := pem.Decode(certPEM)
	der := append([]byte{}, block.Bytes...)
	der[4] ^= 0xff

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
