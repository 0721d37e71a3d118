package ca

import "time"

// Limits of the ca package, in one place.
const (
	// MaxPEMSize bounds any PEM input (CSR, certificate bundle, key). The
	// largest honest input, a bundle of a few RSA-4096 CA certificates, is
	// well under 64 KiB; the bound keeps a hostile input from costing more
	// than a parse of that size.
	MaxPEMSize = 64 << 10

	// MaxSANs bounds the names in one request. A node needs its addresses,
	// hostname and a few extra names; hundreds would only bloat every
	// handshake that carries the certificate.
	MaxSANs = 64

	// MaxDNSNameLength is the longest DNS name (RFC 1035).
	MaxDNSNameLength = 253

	// MaxCommonNameLength is the upper bound of X.520 CommonName (RFC 5280).
	MaxCommonNameLength = 64

	// MinRSABits is the smallest RSA key accepted; smaller keys are factorable.
	MinRSABits = 2048

	// MaxRSABits bounds RSA keys: verifying a signature with a huge modulus is
	// a cheap way to make the signer burn CPU.
	MaxRSABits = 8192

	// CAValidity is the lifetime of a generated CA: 10 years, as in Talos.
	CAValidity = 10 * 365 * 24 * time.Hour

	// ClockSkew is how far back NotBefore is set, so a certificate is valid at
	// once on a peer whose clock is a little behind. It is taken out of the
	// lifetime, never added to it, and shrinks for very short lifetimes.
	ClockSkew = time.Minute

	// MaxTTL is the longest lifetime any profile may be configured with.
	MaxTTL = CAValidity
)
