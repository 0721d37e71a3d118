package ca

import (
	"bytes"
	"encoding/pem"
	"testing"
)

// TestEncodePEMMatchesEncodingPEM: the exact-size encoder writes what
// encoding/pem writes, for lengths around the line and base64 boundaries.
func TestEncodePEMMatchesEncodingPEM(t *testing.T) {
	for n := range 200 {
		der := bytes.Repeat([]byte{byte(n), 0xa5}, n)[:n]

		want := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		got := encodePEM("CERTIFICATE", der)

		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes:\n%s\nwant:\n%s", n, got, want)
		}

		if len(got) != cap(got) {
			t.Errorf("%d bytes: buffer of %d for %d", n, cap(got), len(got))
		}
	}
}
