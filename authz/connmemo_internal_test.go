package authz

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
)

// TestFactsOfFillsTheMemoOnce: the facts of a connection's certificate are
// worked out at its first call and shared by the others; without a memo,
// every call works them out afresh.
func TestFactsOfFillsTheMemoOnce(t *testing.T) {
	leaf := &x509.Certificate{SerialNumber: big.NewInt(0x2a), Subject: pkix.Name{CommonName: "c", Organization: []string{"os:reader", "x"}}}
	other := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{Organization: []string{"os:admin"}}}
	conn := ContextWithConnMemo(context.Background())

	first := factsOf(conn, leaf)
	if first.rolesText != "os:reader" || first.caller.Serial != "2a" || len(first.unknown) != 1 {
		t.Fatalf("facts %+v", first)
	}

	if again := factsOf(conn, leaf); again != first {
		t.Fatal("second call on the connection worked the facts out again")
	}

	if f := factsOf(conn, other); f == first || f.rolesText != "os:admin" {
		t.Fatalf("another certificate got %+v", f)
	}

	bare := context.Background()
	if factsOf(bare, leaf) == factsOf(bare, leaf) {
		t.Fatal("facts kept without a memo")
	}
}
