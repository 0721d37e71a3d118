package tokenstore

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
)

const hashSize = sha256.Size

// hashDomain separates these hashes from any other SHA-256 use of the same
// bytes.
const hashDomain = "aegis trustd token secret v1\x00"

// SetSecret fills r's salt (drawn from rand) and the hash of secret. A
// token's secret has about 82 bits of entropy, so one salted SHA-256 is
// enough: a leaked store gives nothing a search could use.
func (r *Record) SetSecret(rand io.Reader, secret string) error {
	salt := make([]byte, SaltSize)
	if _, err := io.ReadFull(rand, salt); err != nil {
		return fmt.Errorf("tokenstore: reading salt: %w", err)
	}

	r.Salt = salt
	r.SecretHash = hashSecret(salt, secret)

	return nil
}

// MatchesSecret reports whether secret is the record's, in time that does
// not depend on where a wrong secret differs.
func (r *Record) MatchesSecret(secret string) bool {
	return subtle.ConstantTimeCompare(hashSecret(r.Salt, secret), r.SecretHash) == 1
}

func hashSecret(salt []byte, secret string) []byte {
	h := sha256.New()
	h.Write([]byte(hashDomain))
	h.Write(salt)
	h.Write([]byte(secret))

	return h.Sum(nil)
}
