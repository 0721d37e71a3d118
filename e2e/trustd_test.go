package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// createToken makes a token through the node's TokenService.
func createToken(ctx context.Context, t *testing.T, tc tokens.TokenServiceClient, req *tokens.CreateRequest) string {
	t.Helper()

	resp, err := tc.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	return resp.GetMessages()[0].GetToken()
}

// checkIssued checks a certificate trustd returned: the node profile, and
// none of what the CSR asked for beyond names.
func checkIssued(t *testing.T, n *trustdNode, resp *securityapi.CertificateResponse) *x509.Certificate {
	t.Helper()

	if !bytes.Equal(resp.GetCa(), n.cfg.AcceptedCAs().PEM()) {
		t.Fatal("CA bundle is not the node's accepted CAs")
	}

	cert, err := ca.ParseCertificate(resp.GetCrt())
	if err != nil {
		t.Fatal(err)
	}

	switch {
	case len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth:
		t.Fatalf("EKU %v, want ServerAuth only", cert.ExtKeyUsage)
	case len(cert.Subject.Organization) != 0:
		t.Fatalf("Organization %q, want none", cert.Subject.Organization)
	case cert.NotAfter.Sub(cert.NotBefore) > 24*time.Hour:
		t.Fatalf("lifetime %s, want at most 24h", cert.NotAfter.Sub(cert.NotBefore))
	}

	if err = n.cfg.AcceptedCAs().Verify(cert, x509.ExtKeyUsageServerAuth, time.Now()); err != nil {
		t.Fatal(err)
	}

	return cert
}

// TestTrustdSynced runs trustd against a real NTP server: once synced it
// issues node certificates for good tokens and refuses everything else with
// the right code, every decision accounted for in the audit files.
func TestTrustdSynced(t *testing.T) {
	needBinaries(t)

	ntpd := startChrony(t, "127.0.1.10")
	n := newNode(t, "127.0.1.11", ntpd.addr)
	proc := n.start(t)
	n.waitServing(t)

	ctx := testContext(t)
	tc := n.tokens(t)
	key := catest.Key(t, ca.Ed25519)
	// A name the stored tokens below allow; the static token allows the
	// caller's own address alone.
	good := catest.CSR(t, key, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "worker-1", Organization: []string{"os:admin"}},
		DNSNames: []string{"worker-1"},
	})
	own := catest.CSR(t, key, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "127.0.1.12", Organization: []string{"os:admin"}},
		IPAddresses: []net.IP{net.ParseIP("127.0.1.12")},
	})

	// Made first, so it has expired by the time the refusals run.
	expired := createToken(ctx, t, tc, &tokens.CreateRequest{Ttl: durationpb.New(time.Second)})
	expiredAt := time.Now().Add(time.Second)

	calls := 0
	call := func(t *testing.T, source, tok string, csr []byte) (*securityapi.CertificateResponse, error) {
		t.Helper()
		calls++

		return trustdtest.Call(ctx, n.security(t, source), tok, csr)
	}

	t.Run("static token", func(t *testing.T) {
		resp, err := call(t, "127.0.1.12", n.cfg.TrustdToken().Reveal(), own)
		if err != nil {
			t.Fatal(err)
		}

		checkIssued(t, n, resp)
	})

	tokenLimits(t, n, tc, call)

	t.Run("stored tokens", func(t *testing.T) {
		tok := createToken(ctx, t, tc, &tokens.CreateRequest{MaxUses: 2, AllowedSans: []string{"worker-*"}})

		for range 2 {
			resp, err := call(t, "127.0.1.12", tok, good)
			if err != nil {
				t.Fatal(err)
			}

			checkIssued(t, n, resp)
		}
	})

	refusalsSynced(ctx, t, n, tc, call, good, expired, expiredAt)
	rateLimitSynced(t, n, call, good)

	// Every call is accounted for in the audit files, none holding a
	// secret: issuances one record each, refusals in full or counted in a
	// summary, the last of which trustd writes as it stops.
	if err := proc.stop(); err != nil {
		t.Fatalf("trustd stopped with %v", err)
	}

	issuedRecs, refusedRecs := n.auditTrail(t)
	issued, _ := accounted(issuedRecs)
	_, refused := accounted(refusedRecs)

	if issued+refused != calls {
		t.Fatalf("audit files account for %d issued and %d refused for %d calls", issued, refused, calls)
	}

	// audit.log holds issuances and token management, never a refusal.
	for _, rec := range issuedRecs {
		if m := rec["msg"]; m != "certificate issued" && m != "token created" && m != "token revoked" {
			t.Fatalf("audit.log holds %v", rec)
		}
	}

	for _, rec := range append(issuedRecs, refusedRecs...) {
		if strings.Contains(fmt.Sprint(rec), n.cfg.TrustdToken().Secret()) {
			t.Fatalf("an audit record holds the static token's secret: %v", rec)
		}
	}

	if strings.Contains(proc.logs.String(), n.cfg.TrustdToken().Secret()) {
		t.Fatal("the log holds the static token's secret")
	}
}

type callFunc func(t *testing.T, source, tok string, csr []byte) (*securityapi.CertificateResponse, error)

// refusalsSynced covers every refusal a synced trustd makes, each from its
// own source address so the rate limiter stays out of the way.
func refusalsSynced(ctx context.Context, t *testing.T, n *trustdNode, tc tokens.TokenServiceClient, call callFunc, good []byte, expired string, expiredAt time.Time) {
	t.Helper()

	single := createToken(ctx, t, tc, &tokens.CreateRequest{MaxUses: 1, AllowedSans: []string{"worker-*"}})
	if _, err := call(t, "127.0.1.13", single, good); err != nil {
		t.Fatal(err)
	}

	revoked := createToken(ctx, t, tc, &tokens.CreateRequest{})
	if _, err := tc.Revoke(ctx, &tokens.RevokeRequest{Id: revoked[:6]}); err != nil {
		t.Fatal(err)
	}

	valid := createToken(ctx, t, tc, &tokens.CreateRequest{})
	ed := catest.Key(t, ca.Ed25519)

	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}

	// Wait out what is left of the expired token's second, if anything.
	time.Sleep(time.Until(expiredAt))

	tests := []struct {
		name string
		tok  string
		csr  []byte
		code codes.Code
	}{
		{"wrong secret", n.cfg.TrustdToken().ID() + ".zzzzzzzzzzzzzzzz", good, codes.Unauthenticated},
		{"unknown token", "zzzzzz.zzzzzzzzzzzzzzzz", good, codes.Unauthenticated},
		{"expired token", expired, good, codes.Unauthenticated},
		{"revoked token", revoked, good, codes.Unauthenticated},
		{"used-up token", single, good, codes.Unauthenticated},
		{"wildcard SAN", valid, catest.CSR(t, ed, &x509.CertificateRequest{DNSNames: []string{"*.example.com"}}), codes.InvalidArgument},
		{"e-mail SAN", valid, catest.CSR(t, ed, &x509.CertificateRequest{EmailAddresses: []string{"root@example.com"}}), codes.InvalidArgument},
		{"URI SAN", valid, catest.CSR(t, ed, &x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "aegis", Path: "/admin"}}}), codes.InvalidArgument},
		{"RSA-1024", valid, catest.CSR(t, rsa1024, &x509.CertificateRequest{DNSNames: []string{"worker-1"}}), codes.InvalidArgument},
		{"bad signature", valid, flipLastByte(good), codes.InvalidArgument},
		{"CSR over 64 KiB", valid, bytes.Repeat([]byte("A"), ca.MaxPEMSize+1), codes.InvalidArgument},
		// gRPC's receive limit refuses the message before trustd reads it.
		{"10 MB CSR", valid, bytes.Repeat([]byte("A"), 10<<20), codes.ResourceExhausted},
	}

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, fmt.Sprintf("127.0.1.%d", 30+i), tt.tok, tt.csr)
			if status.Code(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
		})
	}
}

// rateLimitSynced: a source that keeps failing is refused, even with a good
// token, while other sources are served.
func rateLimitSynced(t *testing.T, n *trustdNode, call callFunc, good []byte) {
	t.Helper()

	t.Run("rate limit", func(t *testing.T) {
		const source = "127.0.1.60"

		limited := false

		for i := 0; i < 50 && !limited; i++ {
			_, err := call(t, source, "zzzzzz.zzzzzzzzzzzzzzzz", good)

			switch status.Code(err) {
			case codes.ResourceExhausted:
				limited = true
			case codes.Unauthenticated:
			default:
				t.Fatalf("attempt %d: %v", i, err)
			}
		}

		if !limited {
			t.Fatal("the rate limit never engaged")
		}

		if _, err := call(t, source, n.cfg.TrustdToken().Reveal(), good); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("limited source with a good token: %v", err)
		}

		if _, err := call(t, "127.0.1.61", n.cfg.TrustdToken().Reveal(), trustdtest.SourceCSR(t, ca.Ed25519, "127.0.1.61")); err != nil {
			t.Fatalf("another source: %v", err)
		}
	})
}

// tokenLimits: a token never obtains the control plane's address or name
// (PermissionDenied, naming it), however wide its allowed SANs, and the
// static token obtains no address but the caller's own.
func tokenLimits(t *testing.T, n *trustdNode, tc tokens.TokenServiceClient, call callFunc) {
	t.Helper()

	static := n.cfg.TrustdToken().Reveal()
	wide := createToken(testContext(t), t, tc, &tokens.CreateRequest{AllowedSans: []string{"127.0.1.0/24", "cp-*"}})

	tests := []struct {
		name   string
		source string
		tok    string
		csr    []byte
		code   codes.Code
		names  string
	}{
		{"static token, the control plane's address", "127.0.1.14", static, trustdtest.CSR(t, ca.Ed25519, "127.0.1.14", "127.0.1.14", n.ip), codes.PermissionDenied, n.ip},
		{"static token, the control plane's name", "127.0.1.15", static, trustdtest.CSR(t, ca.Ed25519, "cp-1", "127.0.1.15"), codes.PermissionDenied, "cp-1"},
		{"static token from the control plane's own address", n.ip, static, trustdtest.SourceCSR(t, ca.Ed25519, n.ip), codes.PermissionDenied, n.ip},
		{"static token, another address", "127.0.1.16", static, trustdtest.SourceCSR(t, ca.Ed25519, "127.0.1.17"), codes.InvalidArgument, "127.0.1.17"},
		{"token allowing the control plane's network", "127.0.1.18", wide, trustdtest.CSR(t, ca.Ed25519, "127.0.1.18", n.ip), codes.PermissionDenied, n.ip},
		{"token allowing cp-*", "127.0.1.19", wide, trustdtest.CSR(t, ca.Ed25519, "cp-1", "127.0.1.19"), codes.PermissionDenied, "cp-1"},
		{"token allowing the network, another address in it", "127.0.1.20", wide, trustdtest.SourceCSR(t, ca.Ed25519, "127.0.1.21"), codes.OK, ""},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, tt.source, tt.tok, tt.csr)
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.names) {
				t.Fatalf("err = %v, want %s naming %q", err, tt.code, tt.names)
			}
		})
	}
}

func flipLastByte(csrPEM []byte) []byte {
	block, _ := pem.Decode(csrPEM)
	der := bytes.Clone(block.Bytes)
	der[len(der)-1] ^= 1

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
