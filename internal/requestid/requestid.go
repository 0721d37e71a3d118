// Package requestid makes the random IDs that tie what a caller sees to
// the log: the reference an Internal answer carries instead of its cause,
// and the actor ID of the events a request causes.
package requestid

import (
	"encoding/hex"
	"io"
)

// Size is the number of random bytes in an ID: 80 bits, so that two
// requests a node serves never share one in practice, in 20 hex digits.
const Size = 10

// None is the ID given when r fails: an ID is a convenience, and the
// answer and the log line are written regardless.
const None = "none"

// New returns a random ID read from r, in hex, or None if r fails.
func New(r io.Reader) string {
	b := make([]byte, Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return None
	}

	return hex.EncodeToString(b)
}
