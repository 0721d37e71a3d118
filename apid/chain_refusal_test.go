package apid_test

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logtest"
)

// chainTestIP is where the nodes of these tests listen.
const chainTestIP = "127.8.9.10"

// signRaw signs tmpl for a new Ed25519 key with parent's key, or
// self-signs it when parent is nil, bypassing the issuer's profiles so a
// test can make what Aegis never issues.
func signRaw(t *testing.T, tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, crypto.Signer) {
	t.Helper()

	key := catest.Key(t, ca.Ed25519)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)

	if parent == nil {
		parent, parentKey = tmpl, key
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	return cert, key
}

func caTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{string(role.Admin)}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

func adminLeafTemplate() *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{string(role.Admin)}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// TestRefusedChains covers what crypto/tls accepts and Aegis must not: a CA
// certificate as a client, and a chain through an intermediate under a root
// whose path length would allow it.
func TestRefusedChains(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)

	// A root without a path length constraint, as CAs made elsewhere may be.
	root, rootKey := signRaw(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "open root"}, KeyUsage: x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true,
	}, nil, nil)
	inter, interKey := signRaw(t, caTemplate("intermediate"), root, rootKey)
	leaf, leafKey := signRaw(t, adminLeafTemplate(), inter, interKey)
	caClient, caClientKey := signRaw(t, caTemplate("ca as client"), p.CA.Cert, p.CA.Key)

	set, err := ca.NewAcceptedSet(time.Now(), p.CA.Cert, root)
	if err != nil {
		t.Fatal(err)
	}

	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: chainTestIP, Logger: sink.Logger(), AcceptedCAs: func() *ca.AcceptedSet { return set }})

	present := func(key crypto.Signer, chain ...*x509.Certificate) *tls.Config {
		cfg := p.ClientTLS(t, apidtest.Pair{})
		c := tls.Certificate{PrivateKey: key, Leaf: chain[0]}

		for _, cert := range chain {
			c.Certificate = append(c.Certificate, cert.Raw)
		}

		cfg.Certificates = []tls.Certificate{c}

		return cfg
	}

	tests := []struct {
		name   string
		tls    *tls.Config
		reason string
	}{
		{"CA certificate with ClientAuth", present(caClientKey, caClient), "a CA certificate is not a client certificate"},
		{"the accepted CA itself", present(p.CA.Key, p.CA.Cert), "a CA certificate is not a client certificate"},
		{"chain through an intermediate", present(leafKey, leaf, inter), "signed directly by an accepted CA"},
	}

	// Each case from a source of its own: the first refused handshake of a
	// source in an interval is the one logged in full.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apidtest.TalosClientFrom(t, node.Addr, fmt.Sprintf("127.0.7.%d", i+1), tt.tls).Version(testCtx(t))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call: %v, want a refused handshake (Unavailable)", err)
			}

			if !logged(t, &sink, "tls handshake refused", tt.reason) {
				t.Fatalf("no handshake refusal logged with %q: %v", tt.reason, sink.Records(t))
			}
		})
	}

	if calls := node.Backend.Calls(); len(calls) != 0 {
		t.Fatalf("refused clients reached machined: %+v", calls)
	}
}

// TestOpenConnectionsAreRechecked: a handshake verifies once, so a call on a
// connection opened before its CA left the accepted set, or before its
// certificate expired, must still be refused.
func TestOpenConnectionsAreRechecked(t *testing.T) {
	oldPKI, newPKI := apidtest.NewPKI(t), apidtest.NewPKI(t)
	clk := clock.NewFake(time.Now())

	overlap, err := ca.NewAcceptedSet(time.Now(), oldPKI.CA.Cert, newPKI.CA.Cert)
	if err != nil {
		t.Fatal(err)
	}

	var current atomic.Pointer[ca.AcceptedSet]

	current.Store(overlap)
	node := apidtest.StartNode(t, oldPKI, apidtest.NodeConfig{IP: chainTestIP, AcceptedCAs: current.Load, Clock: clk})

	oldClient := apidtest.TalosClient(t, node.Addr, oldPKI.ClientTLS(t, oldPKI.Client(t, role.Reader)))
	newClient := apidtest.TalosClient(t, node.Addr, oldPKI.ClientTLS(t, newPKI.Client(t, role.Reader)))

	if _, err = oldClient.Version(testCtx(t)); err != nil {
		t.Fatalf("old CA during the overlap: %v", err)
	}

	if _, err = newClient.Version(testCtx(t)); err != nil {
		t.Fatalf("new CA during the overlap: %v", err)
	}

	current.Store(newPKI.Accepted(t))

	if _, err = oldClient.Version(testCtx(t)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("old CA's open connection after the rotation: %v, want Unauthenticated", err)
	}

	if _, err = newClient.Version(testCtx(t)); err != nil {
		t.Fatalf("new CA after the rotation: %v", err)
	}

	// Client certificates of apidtest live an hour.
	clk.Advance(2 * time.Hour)

	if _, err = newClient.Version(testCtx(t)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("open connection after its certificate expired: %v, want Unauthenticated", err)
	}

	if calls := node.Backend.Calls(); len(calls) != 3 {
		t.Fatalf("machined saw %d calls, want the 3 allowed ones", len(calls))
	}
}
