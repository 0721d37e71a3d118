package authz

import (
	"crypto/x509"
	"fmt"
	"slices"
)

// Refusals of CheckClientChain; each wraps ErrUnauthenticated.
var (
	// ErrNotDirect: the client certificate was not signed by an accepted
	// CA itself. Aegis CAs sign leaves directly, so a chain through an
	// intermediate (or a CA presented as its own leaf) is not a client.
	ErrNotDirect = fmt.Errorf("%w: the client certificate must be signed directly by an accepted CA", ErrUnauthenticated)
	// ErrCALeaf: the client certificate is a CA certificate.
	ErrCALeaf = fmt.Errorf("%w: a CA certificate is not a client certificate", ErrUnauthenticated)
	// ErrNoClientAuth: the client certificate does not name the ClientAuth
	// extended key usage.
	ErrNoClientAuth = fmt.Errorf("%w: the client certificate lacks the ClientAuth extended key usage", ErrUnauthenticated)
)

// CheckClientChain decides whether a chain that crypto/tls verified (leaf
// first, accepted CA last) may identify a client. crypto/tls accepts more
// than Aegis does: a chain through intermediates the client sent along, a
// leaf that is itself a CA, and a leaf without any extended key usage (taken
// as valid for every use). apid runs this at the handshake and the
// Authenticator again at every call, so neither relies on the other.
func CheckClientChain(chain []*x509.Certificate) error {
	if len(chain) == 0 {
		return ErrUnauthenticated
	}

	leaf := chain[0]

	switch {
	case leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0:
		return ErrCALeaf
	case len(chain) != 2:
		return ErrNotDirect
	case !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth):
		return ErrNoClientAuth
	}

	return nil
}
