// Package ca generates and loads certificate authorities, checks certificate
// requests against Aegis's rules and issues certificates from them under fixed
// profiles, whose usages are read from cfssl signing profiles.
package ca

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"io"
	"math/big"
	"os"
	"time"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Clock is the time source the package reads.
type Clock interface {
	Now() time.Time
}

// CA is a certificate authority: a self-signed CA certificate and its key.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// Config describes a CA to generate. Every field may be left zero.
type Config struct {
	// KeyType of the CA key. Zero means Ed25519.
	KeyType KeyType
	// Organization and CommonName of the CA's subject. Both may be empty,
	// but a CA with neither is hard to tell apart in listings.
	Organization string
	CommonName   string
	// Validity of the CA. Zero means CAValidity (10 years).
	Validity time.Duration
	// Clock gives the start of validity. Nil means the system clock.
	Clock Clock
	// Rand is the source of the serial number and, where the standard
	// library honours it, the key. Nil means crypto/rand.
	Rand io.Reader
}

// Generate creates a new self-signed CA: key usage CertSign and
// DigitalSignature, path length zero (it signs leaves only), a random 128-bit
// serial and a subject key id.
func Generate(cfg Config) (*CA, error) {
	cfg.Clock = defaults.Now(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)

	if cfg.Validity == 0 {
		cfg.Validity = CAValidity
	}

	if cfg.Validity < 0 || cfg.Validity > MaxTTL {
		return nil, refuse(ReasonTTL, "CA validity %s outside (0, %s]", cfg.Validity, MaxTTL)
	}

	key, err := GenerateKey(cfg.KeyType, cfg.Rand)
	if err != nil {
		return nil, err
	}

	serial, err := randomSerial(cfg.Rand)
	if err != nil {
		return nil, err
	}

	ski, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}

	now := cfg.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cfg.CommonName, Organization: nonEmpty(cfg.Organization)},
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(-ClockSkew).Add(cfg.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski,
	}

	der, err := x509.CreateCertificate(cfg.Rand, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("ca: self-signing CA: %w", err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parsing new CA: %w", err)
	}

	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}

	return &CA{Cert: cert, Key: key, CertPEM: EncodeCertificate(cert), KeyPEM: keyPEM}, nil
}

// Parse loads a CA from PEM and checks that the certificate is a CA valid at
// now and that the key is its private half.
func Parse(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}

	if err = CheckCACertificate(cert, now); err != nil {
		return nil, err
	}

	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}

	if !keysMatch(key, cert.PublicKey) {
		return nil, refuse(ReasonKeyMismatch, "the %s key is not the key of CA %q", DescribeKey(key.Public()), cert.Subject)
	}

	return &CA{Cert: cert, Key: key, CertPEM: EncodeCertificate(cert), KeyPEM: keyPEM}, nil
}

// LoadFiles reads a CA from a certificate file and a key file and checks it as Parse does.
func LoadFiles(certPath, keyPath string, now time.Time) (*CA, error) {
	certPEM, err := readLimited(certPath)
	if err != nil {
		return nil, err
	}

	keyPEM, err := readLimited(keyPath)
	if err != nil {
		return nil, err
	}

	c, err := Parse(certPEM, keyPEM, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}

	return c, nil
}

// WriteFiles stores the CA: the certificate world-readable (0644), the key
// 0600. Neither file is replaced unless overwrite is set.
func (c *CA) WriteFiles(certPath, keyPath string, overwrite bool) error {
	if err := atomicfile.Write(keyPath, c.KeyPEM, 0o600, atomicfile.Options{Overwrite: overwrite}); err != nil {
		return err
	}

	return atomicfile.Write(certPath, c.CertPEM, 0o644, atomicfile.Options{Overwrite: overwrite})
}

// CheckCACertificate checks that cert may act as a CA at now: basic
// constraints with CA set, the CertSign key usage, and a validity window
// holding now.
func CheckCACertificate(cert *x509.Certificate, now time.Time) error {
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return refuse(ReasonNotCA, "%q has no CA basic constraint", cert.Subject)
	}

	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return refuse(ReasonNotCA, "%q lacks the CertSign key usage", cert.Subject)
	}

	return checkValidity(cert, now)
}

func checkValidity(cert *x509.Certificate, now time.Time) error {
	if now.Before(cert.NotBefore) {
		return refuse(ReasonNotYetValid, "%q is valid from %s", cert.Subject, cert.NotBefore.UTC().Format(time.RFC3339))
	}

	if now.After(cert.NotAfter) {
		return refuse(ReasonExpired, "%q expired at %s", cert.Subject, cert.NotAfter.UTC().Format(time.RFC3339))
	}

	return nil
}

// randomSerial draws a positive, non-zero 128-bit serial number.
func randomSerial(r io.Reader) (*big.Int, error) {
	buf := make([]byte, 16)

	for {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("ca: reading serial: %w", err)
		}

		if serial := new(big.Int).SetBytes(buf); serial.Sign() > 0 {
			return serial, nil
		}
	}
}

// subjectKeyID follows RFC 7093 method 1: the leftmost 160 bits of the
// SHA-256 of the subjectPublicKey bit string.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("ca: encoding public key: %w", err)
	}

	return subjectKeyIDOf(der)
}

// subjectKeyIDOf is subjectKeyID of a DER SubjectPublicKeyInfo, such as
// a parsed CSR's RawSubjectPublicKeyInfo.
func subjectKeyIDOf(spkiDER []byte) ([]byte, error) {
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}

	rest, err := asn1.Unmarshal(spkiDER, &spki)
	if err != nil {
		return nil, fmt.Errorf("ca: decoding public key: %w", err)
	}

	if len(rest) > 0 {
		return nil, fmt.Errorf("ca: decoding public key: %d trailing bytes", len(rest))
	}

	sum := sha256.Sum256(spki.PublicKey.Bytes)

	return sum[:20], nil
}

func readLimited(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}

	if st.Size() > MaxPEMSize {
		return nil, refuse(ReasonTooLarge, "%s is %d bytes, limit %d", path, st.Size(), MaxPEMSize)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}

	return data, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}

	return []string{s}
}
