package ca

import (
	"crypto"
	"fmt"
	"io"
	"os"

	"github.com/aegis-os/aegis/internal/defaults"
)

// NewKeyPEM makes a new private key of type t, as GenerateKey does, and
// returns it with its PEM encoding (EncodeKey's). Whoever writes the PEM
// writes it with mode 0600.
func NewKeyPEM(t KeyType, rand io.Reader) (crypto.Signer, []byte, error) {
	key, err := GenerateKey(t, rand)
	if err != nil {
		return nil, nil, err
	}

	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}

	return key, keyPEM, nil
}

// NewCheckedCSR builds a certificate request as NewCSR does, then checks it
// as a signer would (ParseCSR), so that a name a signer refuses is found by
// whoever makes the request rather than by the CA.
func NewCheckedCSR(key crypto.Signer, commonName string, hosts []string) ([]byte, error) {
	csrPEM, err := NewCSR(key, commonName, hosts)
	if err != nil {
		return nil, err
	}

	if _, err = ParseCSR(csrPEM); err != nil {
		return nil, err
	}

	return csrPEM, nil
}

// LoadKeyFile reads a private key from a PEM file, as ParseKey does; a
// problem of the key is prefixed with the path.
func LoadKeyFile(path string) (crypto.Signer, error) {
	keyPEM, err := readPEMFile(path)
	if err != nil {
		return nil, err
	}

	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	return key, nil
}

// SignCSRFile issues a certificate for the request in csrPath under req
// (whose CSR it sets) from the CA of the files caCertPath and caKeyPath, at
// the time of clock (nil: the system clock). The request is checked as
// ParseCSR checks it; a problem of it is prefixed with its path.
func SignCSRFile(caCertPath, caKeyPath, csrPath string, req Request, clock Clock) (*Issued, error) {
	iss, err := loadIssuer(caCertPath, caKeyPath, clock)
	if err != nil {
		return nil, err
	}

	csrPEM, err := readPEMFile(csrPath)
	if err != nil {
		return nil, err
	}

	if req.CSR, err = ParseCSR(csrPEM); err != nil {
		return nil, fmt.Errorf("%s: %w", csrPath, err)
	}

	return iss.Issue(req)
}

// loadIssuer is an Issuer for the CA of two files, checked at clock's time.
func loadIssuer(certPath, keyPath string, clock Clock) (*Issuer, error) {
	clock = defaults.Now(clock)

	authority, err := LoadFiles(certPath, keyPath, clock.Now())
	if err != nil {
		return nil, err
	}

	return NewIssuer(IssuerConfig{CA: authority, Clock: clock})
}

// readPEMFile reads a file of at most MaxPEMSize bytes. The errors of
// reading are the os package's, which name the path.
func readPEMFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	data, err := io.ReadAll(io.LimitReader(f, MaxPEMSize+1))
	if err != nil {
		return nil, err
	}

	if len(data) > MaxPEMSize {
		return nil, refuse(ReasonTooLarge, "%s is larger than %d bytes", path, MaxPEMSize)
	}

	return data, nil
}
