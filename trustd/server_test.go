package trustd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// testTimeout bounds every call of these tests; generous, for a busy machine.
const testTimeout = time.Minute

func testContext(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)

	return ctx
}

func TestIssue(t *testing.T) {
	for _, kt := range ca.KeyTypes() {
		t.Run(string(kt), func(t *testing.T) {
			env := trustdtest.Start(t, trustdtest.Options{KeyType: kt, GateOpen: true})
			ctx := testContext(t)

			// The CSR asks for admin rights, a CA and client auth; it gets none.
			csrPEM := catest.CSR(t, catest.Key(t, kt), &x509.CertificateRequest{
				Subject:     pkix.Name{CommonName: "127.0.1.9", Organization: []string{"os:admin"}},
				IPAddresses: []net.IP{net.ParseIP("127.0.1.9")},
			})

			resp, err := trustdtest.Call(ctx, env.Client(t, "127.0.1.9"), trustdtest.StaticToken, csrPEM)
			if err != nil {
				t.Fatal(err)
			}

			cert := checkNodeCertificate(t, env, resp)

			recs := env.Audit.Records()
			if len(recs) != 1 {
				t.Fatalf("%d audit records, want 1", len(recs))
			}

			rec := recs[0]
			if rec.String(trustd.AuditDecision) != trustd.DecisionIssued || rec.String(trustd.AuditTokenID) != "static" ||
				rec.String(trustd.AuditSerial) != fmt.Sprintf("%x", cert.SerialNumber) || rec.String(trustd.AuditSource) != "127.0.1.9" {
				t.Fatalf("audit record = %+v", rec)
			}

			if sans, _ := rec.Attrs[trustd.AuditSANs].([]string); len(sans) != 1 {
				t.Fatalf("audit SANs = %v", rec.Attrs[trustd.AuditSANs])
			}

			assertNoSecret(t, env)
		})
	}
}

// checkNodeCertificate checks what every issued node certificate must be.
func checkNodeCertificate(t *testing.T, env *trustdtest.Env, resp *securityapi.CertificateResponse) *x509.Certificate {
	t.Helper()

	if !bytes.Equal(resp.GetCa(), env.CAs.PEM()) {
		t.Fatal("response CA bundle is not the accepted CAs")
	}

	cert, err := ca.ParseCertificate(resp.GetCrt())
	if err != nil {
		t.Fatal(err)
	}

	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Fatalf("EKU = %v, want ServerAuth only", cert.ExtKeyUsage)
	}

	if len(cert.Subject.Organization) != 0 || cert.IsCA {
		t.Fatalf("organization %q, CA %v", cert.Subject.Organization, cert.IsCA)
	}

	if life := cert.NotAfter.Sub(cert.NotBefore); life > 24*time.Hour {
		t.Fatalf("lifetime %s", life)
	}

	if err = env.CAs.Verify(cert, x509.ExtKeyUsageServerAuth, time.Now()); err != nil {
		t.Fatal(err)
	}

	return cert
}

// assertNoSecret fails if any audit record holds a token secret.
func assertNoSecret(t *testing.T, env *trustdtest.Env) {
	t.Helper()

	for _, rec := range env.Audit.Records() {
		if s := fmt.Sprint(rec.Attrs); bytes.Contains([]byte(s), []byte("0123456789abcdef")) {
			t.Fatalf("audit record holds a secret: %s", s)
		}
	}
}

type refusal struct {
	name  string
	token string // "" sends none
	csr   []byte
	md    metadata.MD // extra metadata
	code  codes.Code
}

func TestRefusals(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	ctx := testContext(t)
	ed := catest.Key(t, ca.Ed25519)
	good := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	usedUp := env.CreateToken(t, time.Hour, 1)
	if _, err := trustdtest.Call(ctx, env.Client(t, ""), usedUp, good); err != nil {
		t.Fatal(err)
	}

	revoked := env.CreateToken(t, time.Hour, 0)
	if _, err := env.Store.Revoke(ctx, revoked[:6], time.Now()); err != nil {
		t.Fatal(err)
	}

	expired := env.CreateToken(t, time.Nanosecond, 0)
	restricted := env.CreateToken(t, time.Hour, 0, "node-*.example", "10.5.0.0/24")
	valid := env.CreateToken(t, time.Hour, 0)

	tests := []refusal{
		{name: "no token", csr: good, code: codes.Unauthenticated},
		{name: "malformed token", token: "not-a-token", csr: good, code: codes.Unauthenticated},
		{name: "two tokens", token: trustdtest.StaticToken, md: metadata.Pairs("token", trustdtest.StaticToken), csr: good, code: codes.Unauthenticated},
		{name: "wrong secret", token: "static.0123456789abcdee", csr: good, code: codes.Unauthenticated},
		{name: "unknown id", token: "zzzzzz.0123456789abcdef", csr: good, code: codes.Unauthenticated},
		{name: "expired", token: expired, csr: good, code: codes.Unauthenticated},
		{name: "revoked", token: revoked, csr: good, code: codes.Unauthenticated},
		{name: "used up", token: usedUp, csr: good, code: codes.Unauthenticated},
		{name: "no CSR", token: valid, code: codes.InvalidArgument},
		{name: "wildcard SAN", token: valid, csr: catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: []string{"*.example"}}), code: codes.InvalidArgument},
		{name: "e-mail SAN", token: valid, csr: catest.CSR(t, ed, &x509.CertificateRequest{EmailAddresses: []string{"a@example.com"}}), code: codes.InvalidArgument},
		{name: "URI SAN", token: valid, csr: catest.CSR(t, ed, &x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}}), code: codes.InvalidArgument},
		{name: "RSA-1024", token: valid, csr: catest.CSR(t, rsaKey(t, 1024), &x509.CertificateRequest{}), code: codes.InvalidArgument},
		{name: "P-224", token: valid, csr: catest.CSR(t, p224Key(t), &x509.CertificateRequest{}), code: codes.InvalidArgument},
		{name: "bad signature", token: valid, csr: badSignature(t, good), code: codes.InvalidArgument},
		{name: "CSR over ca's limit", token: valid, csr: oversized(ca.MaxPEMSize + 1), code: codes.InvalidArgument},
		{name: "SAN outside token's policy", token: restricted, csr: trustdtest.CSR(t, ca.Ed25519, "node-1.example", "node-1.example", "10.6.0.1"), code: codes.InvalidArgument},
		{name: "CN outside token's policy", token: restricted, csr: trustdtest.CSR(t, ca.Ed25519, "evil.example", "node-1.example"), code: codes.InvalidArgument},
		{name: "10 MB message", token: valid, csr: oversized(10 << 20), code: codes.ResourceExhausted},
	}

	client := env.Client(t, "")

	// Each case calls from a source of its own: the first refusal of a
	// source in an interval is the one written in full.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := env.Client(t, fmt.Sprintf("127.0.1.%d", 100+i))
			before := len(env.Audit.Records())
			callCtx := ctx

			if tt.md != nil {
				callCtx = metadata.NewOutgoingContext(ctx, tt.md)
			}

			_, err := trustdtest.Call(callCtx, client, tt.token, tt.csr)
			if status.Code(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}

			recs, err := env.Audit.WaitFor(ctx, before+1)
			if err != nil {
				t.Fatal(err)
			}

			if len(recs) != before+1 || recs[before].String(trustd.AuditDecision) != trustd.DecisionRefused || recs[before].String(trustd.AuditReason) == "" {
				t.Fatalf("audit records after the call: %+v", recs[before:])
			}

			if recs[before].String(trustd.AuditCode) != tt.code.String() {
				t.Fatalf("audit code = %s, want %s", recs[before].String(trustd.AuditCode), tt.code)
			}
		})
	}

	t.Run("restricted token within policy", func(t *testing.T) {
		resp, err := trustdtest.Call(ctx, client, restricted, trustdtest.CSR(t, ca.Ed25519, "node-7.example", "node-7.example", "10.5.0.7"))
		if err != nil {
			t.Fatal(err)
		}

		checkNodeCertificate(t, env, resp)
	})

	assertNoSecret(t, env)
}

// TestUnknownAndWrongLookAlike: a caller cannot tell an unknown id from a
// wrong secret by the answer.
func TestUnknownAndWrongLookAlike(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	ctx := testContext(t)
	client := env.Client(t, "")
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)
	known := env.CreateToken(t, time.Hour, 0)

	_, unknown := trustdtest.Call(ctx, client, "zzzzzz.0123456789abcdef", csr)
	_, wrong := trustdtest.Call(ctx, client, known[:7]+"0000000000000000", csr)

	if status.Convert(unknown).Proto().String() != status.Convert(wrong).Proto().String() {
		t.Fatalf("unknown id: %v; wrong secret: %v", unknown, wrong)
	}
}

func rsaKey(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()

	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}

	return k
}

func p224Key(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()

	k, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	return k
}

// badSignature flips a bit in the CSR's signature.
func badSignature(t *testing.T, csrPEM []byte) []byte {
	t.Helper()

	block, _ := pem.Decode(csrPEM)
	der := bytes.Clone(block.Bytes)
	der[len(der)-1] ^= 1

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func oversized(n int) []byte { return bytes.Repeat([]byte("A"), n) }
