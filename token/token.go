// Package token defines the bootstrap token format shared by trustd and the
// configs: "id.secret", a 6-character id and a 16-character secret drawn from
// [a-z0-9], as in Talos and kubeadm.
package token

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
)

// Lengths of the two parts of a token.
const (
	IDLength     = 6
	SecretLength = 16
	// Length is the length of a whole token, "id.secret".
	Length = IDLength + 1 + SecretLength
)

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// ErrMalformed is returned for any string that is not of the token form.
var ErrMalformed = errors.New("token: malformed (want [a-z0-9]{6}.[a-z0-9]{16})")

// Token is a parsed bootstrap token. Its String method hides the secret so a
// token can be put in a log line or an error without leaking it; Reveal gives
// the whole token where it must be written out.
type Token struct {
	id     string
	secret string
}

// Parse checks unsafe against the token form. The error never repeats the
// input, which may be a secret typed in the wrong place.
func Parse(unsafe string) (Token, error) {
	if len(unsafe) != Length || unsafe[IDLength] != '.' {
		return Token{}, ErrMalformed
	}

	id, secret := unsafe[:IDLength], unsafe[IDLength+1:]
	if !inAlphabet(id) || !inAlphabet(secret) {
		return Token{}, ErrMalformed
	}

	return Token{id: id, secret: secret}, nil
}

// Generate draws a new token from r, which should be crypto/rand.Reader
// outside tests.
func Generate(r io.Reader) (Token, error) {
	b, err := randomString(r, IDLength+SecretLength)
	if err != nil {
		return Token{}, err
	}

	return Token{id: b[:IDLength], secret: b[IDLength:]}, nil
}

// ValidID reports whether unsafe has the form of a token id, so that an id
// given alone (to revoke a token, or as a store key) is checked like the id
// inside a whole token.
func ValidID(unsafe string) bool { return len(unsafe) == IDLength && inAlphabet(unsafe) }

// ID returns the public half of the token.
func (t Token) ID() string { return t.id }

// Secret returns the secret half of the token.
func (t Token) Secret() string { return t.secret }

// IsZero reports whether t is the zero Token.
func (t Token) IsZero() bool { return t.id == "" }

// Reveal returns the whole token, secret included.
func (t Token) Reveal() string {
	if t.IsZero() {
		return ""
	}

	return t.id + "." + t.secret
}

// String returns the id with the secret masked.
func (t Token) String() string {
	if t.IsZero() {
		return "<no token>"
	}

	return t.id + ".****************"
}

// Equal compares two tokens in time that does not depend on where they differ.
func (t Token) Equal(o Token) bool {
	return subtle.ConstantTimeCompare([]byte(t.Reveal()), []byte(o.Reveal())) == 1
}

func inAlphabet(s string) bool {
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}

	return true
}

// randomString draws n characters of the alphabet from r without modulo bias:
// bytes at or above the largest multiple of len(alphabet) are discarded.
func randomString(r io.Reader, n int) (string, error) {
	const limit = 256 - 256%len(alphabet)

	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)

	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("token: reading randomness: %w", err)
		}

		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}

	return string(out), nil
}
