package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"

	"github.com/aegis-os/aegis/internal/defaults"
)

// KeyType is the algorithm of a key Aegis generates.
type KeyType string

// Key types Aegis generates. Ed25519 is the default: small, fast and without
// the pitfalls of nonce generation.
const (
	Ed25519   KeyType = "ed25519"
	ECDSAP256 KeyType = "ecdsa-p256"
)

// KeyTypes lists the key types Aegis generates, default first.
func KeyTypes() []KeyType { return []KeyType{Ed25519, ECDSAP256} }

// ParseKeyType reads a key type name; the empty string means the default.
func ParseKeyType(s string) (KeyType, error) {
	switch KeyType(s) {
	case "", Ed25519:
		return Ed25519, nil
	case ECDSAP256, "ecdsa", "p256":
		return ECDSAP256, nil
	default:
		return "", refuse(ReasonKeyType, "unknown key type %q (want %s or %s)", s, Ed25519, ECDSAP256)
	}
}

// KeyTypeOf returns the KeyType that generates keys like pub, so that a node
// can make its key of the same type as its CA's.
func KeyTypeOf(pub crypto.PublicKey) (KeyType, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return Ed25519, nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return ECDSAP256, nil
		}
	}

	return "", refuse(ReasonKeyType, "no generator for %s keys", DescribeKey(pub))
}

// GenerateKey makes a new private key of type t. rand may be nil for
// crypto/rand; the standard library may ignore it for some key types.
func GenerateKey(t KeyType, rand io.Reader) (crypto.Signer, error) {
	rand = defaults.Rand(rand)

	switch t {
	case "", Ed25519:
		_, priv, err := ed25519.GenerateKey(rand)
		if err != nil {
			return nil, fmt.Errorf("ca: generating ed25519 key: %w", err)
		}

		return priv, nil
	case ECDSAP256:
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand)
		if err != nil {
			return nil, fmt.Errorf("ca: generating ecdsa key: %w", err)
		}

		return key, nil
	default:
		return nil, refuse(ReasonKeyType, "unknown key type %q", t)
	}
}

// EncodeKey returns key as a PKCS #8 "PRIVATE KEY" PEM block, the form every
// TLS stack and the Talos tools read.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("ca: encoding key: %w", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey reads a private key from PEM. It accepts PKCS #8 ("PRIVATE KEY"
// and Talos's "ED25519 PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") and PKCS #1
// ("RSA PRIVATE KEY").
func ParseKey(pemBytes []byte) (crypto.Signer, error) {
	if len(pemBytes) > MaxPEMSize {
		return nil, refuse(ReasonTooLarge, "key PEM is %d bytes, limit %d", len(pemBytes), MaxPEMSize)
	}

	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, refuse(ReasonBadPEM, "no PEM block in key data")
	}

	var (
		key any
		err error
	)

	switch block.Type {
	case "PRIVATE KEY", "ED25519 PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, refuse(ReasonBadPEM, "PEM block %q is not a private key", block.Type)
	}

	if err != nil {
		return nil, refuse(ReasonBadKey, "%v", err)
	}

	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, refuse(ReasonBadKey, "%T cannot sign", key)
	}

	return signer, nil
}

// DescribeKey names a public key's algorithm and size, e.g. "ECDSA P-256".
func DescribeKey(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return "Ed25519"
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// checkPublicKey enforces the key types a certificate may be issued for:
// Ed25519, ECDSA P-256 or P-384, RSA of MinRSABits to MaxRSABits.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits >= MinRSABits && bits <= MaxRSABits {
			return nil
		}
	}

	return refuse(ReasonKeyType, "%s (allowed: Ed25519, ECDSA P-256/P-384, RSA %d-%d)", DescribeKey(pub), MinRSABits, MaxRSABits)
}

// keysMatch reports whether priv is the private half of pub.
func keysMatch(priv crypto.Signer, pub crypto.PublicKey) bool {
	return publicKeysEqual(priv.Public(), pub)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })

	return ok && e.Equal(b)
}
