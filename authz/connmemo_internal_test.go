package authz

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
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

// TestNodeCertificateFillsTheMemoOnce: a connection's node certificate is
// verified at its first call and not again while the roots are equal and
// the chain valid; other roots verify it afresh.
func TestNodeCertificateFillsTheMemoOnce(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true,
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	roots := func() *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(cert)

		return p
	}

	conn := ContextWithConnMemo(peer.NewContext(context.Background(), &peer.Peer{
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}},
	}))
	memo := conn.Value(connMemoKey{}).(*connMemo)

	if _, err := NodeCertificate(conn, roots(), now); err != nil {
		t.Fatal(err)
	}

	first := memo.node.Load()
	if first == nil {
		t.Fatal("the verification was not kept")
	}

	if _, err := NodeCertificate(conn, roots(), now.Add(time.Minute)); err != nil || memo.node.Load() != first {
		t.Fatalf("the second call verified again (%v)", err)
	}

	if _, err := NodeCertificate(conn, x509.NewCertPool(), now); err == nil || memo.node.Load() != first {
		t.Fatalf("other roots: %v; the memo changed: %v", err, memo.node.Load() != first)
	}
}
