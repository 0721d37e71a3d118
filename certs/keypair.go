package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/aegis-os/aegis/ca"
)

// KeyPair holds a TLS certificate and key that may be replaced while servers
// and clients use it: handshakes read the current pair through
// GetCertificate or GetClientCertificate, so a renewal needs no restart and
// drops no connection. Its zero value holds nothing; it is safe for
// concurrent use.
type KeyPair struct {
	cur atomic.Pointer[tls.Certificate]
}

// NewKeyPair returns a KeyPair holding the given PEM certificate (chain) and key.
func NewKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	kp := &KeyPair{}
	if err := kp.Set(certPEM, keyPEM); err != nil {
		return nil, err
	}

	return kp, nil
}

// LoadKeyPairFiles reads a KeyPair from a certificate file and a key file.
func LoadKeyPairFiles(certPath, keyPath string) (*KeyPair, error) {
	kp := &KeyPair{}
	if err := kp.SetFromFiles(certPath, keyPath); err != nil {
		return nil, err
	}

	return kp, nil
}

// Set replaces the pair after checking that the key matches the certificate.
// On error the old pair stays in place.
func (k *KeyPair) Set(certPEM, keyPEM []byte) error {
	if len(certPEM) > ca.MaxPEMSize || len(keyPEM) > ca.MaxPEMSize {
		return errors.New("certs: key pair PEM too large")
	}

	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certs: key pair: %w", err)
	}

	k.cur.Store(&pair)

	return nil
}

// SetFromFiles replaces the pair with the content of two files.
func (k *KeyPair) SetFromFiles(certPath, keyPath string) error {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}

	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}

	if err := k.Set(certPEM, keyPEM); err != nil {
		return fmt.Errorf("%s: %w", certPath, err)
	}

	return nil
}

// Certificate returns the current pair, or nil if none was set. Its Leaf is parsed.
func (k *KeyPair) Certificate() *tls.Certificate { return k.cur.Load() }

// GetCertificate serves the current pair to a TLS server handshake.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := k.cur.Load(); c != nil {
		return c, nil
	}

	return nil, errors.New("certs: no server certificate yet")
}

// GetClientCertificate serves the current pair to a TLS client handshake.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := k.cur.Load(); c != nil {
		return c, nil
	}

	// An empty certificate makes the handshake proceed without one, and the
	// server refuse it with a clear alert.
	return &tls.Certificate{}, nil
}
