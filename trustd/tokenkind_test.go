package trustd_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestAuditTokenKind: each issuance record says which kind of token it
// was for, current static, previous static or stored, by its id alone.
func TestAuditTokenKind(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	ctx := testContext(t)

	previous, err := token.Parse(trustdtest.StaticToken)
	if err != nil {
		t.Fatal(err)
	}

	current, err := token.Parse("rotate.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}

	env.Auth.SetStatic(current, nil, []tokenauth.Previous{{Token: previous, Expires: time.Now().Add(time.Hour)}})
	stored := env.CreateToken(t, time.Hour, 0)

	for i, tt := range []struct{ tok, id, kind string }{
		{current.Reveal(), current.ID(), trustd.TokenKindStatic},
		{previous.Reveal(), previous.ID(), trustd.TokenKindStaticPrevious},
		{stored, stored[:token.IDLength], trustd.TokenKindStored},
	} {
		csr := catest.CSR(t, catest.Key(t, ca.Ed25519), &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: trustdtest.CallerIP}, IPAddresses: []net.IP{net.ParseIP(trustdtest.CallerIP)},
		})

		if _, err := trustdtest.Call(ctx, env.Client(t, ""), tt.tok, csr); err != nil {
			t.Fatalf("%s token: %v", tt.kind, err)
		}

		recs, err := env.Audit.WaitFor(ctx, i+1)
		if err != nil {
			t.Fatal(err)
		}

		rec := recs[i]
		if rec.String(trustd.AuditDecision) != trustd.DecisionIssued || rec.String(trustd.AuditTokenID) != tt.id ||
			rec.String(trustd.AuditTokenKind) != tt.kind {
			t.Fatalf("audit record %+v, want issued to %s, kind %s", rec.Attrs, tt.id, tt.kind)
		}
	}

	assertNoSecret(t, env)
}
