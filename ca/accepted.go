package ca

import (
	"bytes"
	"crypto/x509"
	"time"
)

// AcceptedSet is the list of CAs a verifier trusts. During a CA rotation it
// holds the old and the new CA, so certificates from either verify; when the
// rotation ends the old one is dropped. A set is immutable: a change builds a
// new set, and verifiers pick up the new one per handshake.
type AcceptedSet struct {
	certs []*x509.Certificate
	// pem is the set's PEM bundle, encoded once: trustd returns it with
	// every certificate it signs.
	pem []byte
	// pool holds the set's CAs for verification, built once: every
	// handshake and every check of a node's certificate asks for it.
	pool *x509.CertPool
}

// NewAcceptedSet builds a set from CA certificates, dropping duplicates. Every
// certificate must be a CA valid at now.
func NewAcceptedSet(now time.Time, certs ...*x509.Certificate) (*AcceptedSet, error) {
	s := &AcceptedSet{}

	for _, c := range certs {
		if err := CheckCACertificate(c, now); err != nil {
			return nil, err
		}

		if !s.Contains(c) {
			s.certs = append(s.certs, c)
		}
	}

	if len(s.certs) == 0 {
		return nil, refuse(ReasonNotCA, "accepted CA set is empty")
	}

	for _, c := range s.certs {
		s.pem = append(s.pem, EncodeCertificate(c)...)
	}

	s.pool = newPool(s.certs)

	return s, nil
}

// ParseAcceptedSet reads a PEM bundle of CA certificates into a set.
func ParseAcceptedSet(pemBytes []byte, now time.Time) (*AcceptedSet, error) {
	certs, err := ParseCertificates(pemBytes)
	if err != nil {
		return nil, err
	}

	return NewAcceptedSet(now, certs...)
}

// Certificates returns the CAs in the set, in the order they were added.
func (s *AcceptedSet) Certificates() []*x509.Certificate {
	return append([]*x509.Certificate(nil), s.certs...)
}

// Contains reports whether cert is in the set.
func (s *AcceptedSet) Contains(cert *x509.Certificate) bool {
	for _, c := range s.certs {
		if bytes.Equal(c.Raw, cert.Raw) {
			return true
		}
	}

	return false
}

// Pool returns the verification pool holding the set's CAs. It is built
// once and shared, as the set is immutable: the caller must not add to it.
// A trustd serving thousands of workers asked for a new one at every
// handshake and every check of a node's certificate, and kept one per
// connection with its verification.
func (s *AcceptedSet) Pool() *x509.CertPool {
	if s.pool == nil {
		return newPool(s.certs)
	}

	return s.pool
}

func newPool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}

	return pool
}

// PEM returns the set as a PEM bundle, as trustd returns it to a joining
// node. The bundle is encoded once and shared: the caller must not modify
// it (appending is safe; it copies).
func (s *AcceptedSet) PEM() []byte {
	return s.pem[:len(s.pem):len(s.pem)]
}

// Verify checks that leaf chains to a CA in the set at now and carries the
// extended key usage eku. Intermediates are not accepted: Aegis CAs sign
// leaves directly.
func (s *AcceptedSet) Verify(leaf *x509.Certificate, eku x509.ExtKeyUsage, now time.Time) error {
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       s.Pool(),
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{eku},
	})

	return err
}
