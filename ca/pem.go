package ca

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
)

// ParseCertificate reads the single certificate in pemBytes. Trailing data
// other than whitespace is refused: a second certificate where one is
// expected is a mistake the caller should hear about.
func ParseCertificate(pemBytes []byte) (*x509.Certificate, error) {
	certs, err := ParseCertificates(pemBytes)
	if err != nil {
		return nil, err
	}

	if len(certs) != 1 {
		return nil, refuse(ReasonBadPEM, "want one certificate, found %d", len(certs))
	}

	return certs[0], nil
}

// ParseCertificates reads every certificate in pemBytes; there must be at
// least one and no block of another type.
func ParseCertificates(pemBytes []byte) ([]*x509.Certificate, error) {
	if len(pemBytes) > MaxPEMSize {
		return nil, refuse(ReasonTooLarge, "certificate PEM is %d bytes, limit %d", len(pemBytes), MaxPEMSize)
	}

	var certs []*x509.Certificate

	rest := pemBytes

	for {
		var block *pem.Block

		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}

		if block.Type != "CERTIFICATE" {
			return nil, refuse(ReasonBadPEM, "PEM block %q is not a certificate", block.Type)
		}

		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, refuse(ReasonBadCertificate, "%v", err)
		}

		certs = append(certs, cert)
	}

	if len(certs) == 0 {
		return nil, refuse(ReasonBadPEM, "no certificate PEM block found")
	}

	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, refuse(ReasonBadPEM, "%d bytes of trailing data after the certificates (truncated or not PEM)", len(rest))
	}

	return certs, nil
}

// EncodeCertificate returns cert as a PEM block.
func EncodeCertificate(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// Fingerprint is the SHA-256 digest of a certificate's DER form, as
// "sha256:" followed by lowercase hex; it is how operators compare CAs.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)

	return "sha256:" + hex.EncodeToString(sum[:])
}
