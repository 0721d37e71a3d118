package ca

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
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
	return encodePEM("CERTIFICATE", cert.Raw)
}

// encodePEM is pem.EncodeToMemory of a block without headers, byte for
// byte, written into one buffer of the exact size: the encoder of
// encoding/pem grows a buffer through a base64 stream and a line breaker,
// which is most of the allocations of an issuance.
func encodePEM(typ string, der []byte) []byte {
	const line = 48 // DER bytes per 64-character line

	n := base64.StdEncoding.EncodedLen(len(der))
	out := make([]byte, 0, 2*len(typ)+len("-----BEGIN -----\n-----END -----\n")+n+(len(der)+line-1)/line)
	out = append(append(append(out, "-----BEGIN "...), typ...), "-----\n"...)

	for i := 0; i < len(der); i += line {
		out = base64.StdEncoding.AppendEncode(out, der[i:min(i+line, len(der))])
		out = append(out, '\n')
	}

	return append(append(append(out, "-----END "...), typ...), "-----\n"...)
}

// Fingerprint is the SHA-256 digest of a certificate's DER form, as
// "sha256:" followed by lowercase hex; it is how operators compare CAs.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)

	return "sha256:" + hex.EncodeToString(sum[:])
}
