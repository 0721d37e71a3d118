package trustd_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestWhatATokenObtains: a token obtains a certificate for the address the
// call comes from, for what the token explicitly allows and, when it allows
// no name, for one name, the node's own; never for a control plane's
// address or name (the server's own, from its certificate, or one the
// config names), whatever the token allows.
func TestWhatATokenObtains(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, ControlPlanes: []string{"127.0.1.2:50001", "CP-2.example", "[fd00::1]"}})
	ctx := testContext(t)

	open := env.CreateToken(t, time.Hour, 0)
	wide := env.CreateToken(t, time.Hour, 0, "127.0.1.0/24", "*.example", "fd00::/64", "trustd")
	static := trustdtest.StaticToken
	denied := codes.PermissionDenied

	csr := func(cn string, hosts ...string) []byte {
		return trustdtest.CSR(t, ca.Ed25519, cn, hosts...)
	}

	tests := []struct {
		name   string
		source string
		token  string
		csr    []byte
		code   codes.Code
		names  string // in the refusal
	}{
		{name: "static token, the caller's own address", source: "127.0.1.30", token: static, csr: csr("127.0.1.30", "127.0.1.30")},
		{name: "static token, another address", source: "127.0.1.31", token: static, csr: csr("127.0.1.31", "127.0.1.32"), code: codes.InvalidArgument, names: "127.0.1.32"},
		{name: "static token, the node's own name", source: "127.0.1.33", token: static, csr: csr("127.0.1.33", "127.0.1.33", "worker-1")},
		{name: "static token, its name as common name", source: "127.0.1.34", token: static, csr: csr("worker-4", "127.0.1.34", "Worker-4")},
		{name: "static token, two names", source: "127.0.1.44", token: static, csr: csr("worker-5", "127.0.1.44", "worker-6"), code: codes.InvalidArgument, names: "[worker-5 worker-6]"},
		{name: "static token, the server's own address", source: "127.0.1.35", token: static, csr: csr("127.0.1.35", trustdtest.ListenIP), code: denied, names: trustdtest.ListenIP},
		{name: "static token from the control plane's address", source: trustdtest.ListenIP, token: static, csr: csr(trustdtest.ListenIP, trustdtest.ListenIP), code: denied, names: trustdtest.ListenIP},
		{name: "token without SANs, its own address", source: "127.0.1.36", token: open, csr: csr("127.0.1.36", "127.0.1.36")},
		{name: "token without SANs, its name", source: "127.0.1.37", token: open, csr: csr("node-1", "node-1")},
		{name: "token without SANs, two names", source: "127.0.1.45", token: open, csr: csr("node-1", "node-1", "node-2"), code: codes.InvalidArgument, names: "node-2"},
		{name: "wide token, names it allows", source: "127.0.1.38", token: wide, csr: csr("node-1.example", "node-1.example", "127.0.1.77")},
		{name: "wide token, a configured control plane's address", source: "127.0.1.39", token: wide, csr: csr("node-2.example", "127.0.1.2"), code: denied, names: "127.0.1.2"},
		{name: "wide token, a control plane's name in any case", source: "127.0.1.40", token: wide, csr: csr("node-3.example", "cp-2.EXAMPLE"), code: denied, names: "cp-2.EXAMPLE"},
		{name: "wide token, a control plane's IPv6 address", source: "127.0.1.41", token: wide, csr: csr("node-4.example", "fd00::1"), code: denied, names: "fd00::1"},
		{name: "wide token, the server's common name", source: "127.0.1.42", token: wide, csr: csr("trustd"), code: denied, names: "trustd"},
		{
			name: "wide token, control plane as IP common name", source: "127.0.1.43", token: wide, code: denied, names: "127.0.1.2",
			csr: catest.CSR(t, catest.Key(t, ca.Ed25519), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "127.0.1.2"}, IPAddresses: []net.IP{net.ParseIP("127.0.1.43")}}),
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(env.Audit.Records())

			_, err := trustdtest.Call(ctx, env.Client(t, tt.source), tt.token, tt.csr)
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.names) {
				t.Fatalf("err = %v, want %s naming %q", err, tt.code, tt.names)
			}

			recs, err := env.Audit.WaitFor(ctx, before+1)
			if err != nil {
				t.Fatal(err)
			}

			rec := recs[before]
			if rec.String(trustd.AuditCode) != tt.code.String() && tt.code != codes.OK || rec.String(trustd.AuditSource) != tt.source {
				t.Fatalf("audit record %+v", rec)
			}

			if tt.code == denied && !strings.Contains(rec.String(trustd.AuditReason), tt.names) {
				t.Fatalf("the refusal's record does not name %q: %+v", tt.names, rec)
			}
		})
	}
}
