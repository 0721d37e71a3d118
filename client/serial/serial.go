// Package serial reads certificate serial numbers as operators write them
// and gives the one form the revocation list holds. aegisctl checks a
// serial before it calls, and the revocation service reads it again, with
// the same function, so the package lives on the client side and imports
// no server package.
package serial

import (
	"fmt"
	"math/big"
	"strings"
)

// MaxLength bounds a serial in hexadecimal digits: RFC 5280 allows serials
// of up to 20 octets.
const MaxLength = 40

// Error is a refusal of a serial; its message quotes the serial (cut to
// a line) and says what is wrong.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Parse reads a serial as an operator writes it: hexadecimal, with an
// optional 0x prefix and optional colons (openssl's form), and returns it
// in canonical form (Of). Errors are *Error.
func Parse(s string) (string, error) {
	clean := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	clean = strings.TrimPrefix(clean, "0x")

	if clean == "" || len(clean) > MaxLength {
		return "", &Error{fmt.Sprintf("serial %q: want 1 to %d hexadecimal digits", truncate(s), MaxLength)}
	}

	n, ok := new(big.Int).SetString(clean, 16)
	if !ok || n.Sign() <= 0 {
		return "", &Error{fmt.Sprintf("serial %q is not a positive hexadecimal number", truncate(s))}
	}

	return Of(n), nil
}

// Of is the canonical form of a certificate's serial number: lower-case
// hexadecimal without leading zeros.
func Of(n *big.Int) string { return n.Text(16) }

// truncate cuts what an error quotes to a line.
func truncate(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}

	return s[:n] + "…"
}
