package authz_test

import (
	"context"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/wire"
)

// TestConnMemoKeepsPerCallDecisionsPerCall: on a connection whose context
// holds a memo, what a call's metadata decides (an impersonator's roles and
// the caller it names) is decided again at every call, however the calls
// before it went; only the certificate's own facts are kept.
func TestConnMemoKeepsPerCallDecisionsPerCall(t *testing.T) {
	p := newPKI(t)
	imp := p.impersonator(t)
	conn := authz.ContextWithConnMemo(context.Background())
	unary, _ := chain(nil, authz.FromCertificate)

	calls := []struct {
		name   string
		md     metadata.MD
		code   codes.Code
		roles  string
		caller string
	}{
		{"reader for one client", metadata.Pairs(wire.MetadataRole, "os:reader",
			authz.CallerSerialMetadataKey, "aa", authz.CallerSubjectMetadataKey, "CN=one"), codes.OK, "os:reader", "CN=one"},
		{"operator for another", metadata.Pairs(wire.MetadataRole, "os:operator",
			authz.CallerSerialMetadataKey, "bb", authz.CallerSubjectMetadataKey, "CN=two"), codes.OK, "os:operator", "CN=two"},
		{"nothing passed", nil, codes.PermissionDenied, "", ""},
		{"reader again, no caller", metadata.Pairs(wire.MetadataRole, "os:reader"), codes.OK, "os:reader", imp.Subject.String()},
	}

	for _, c := range calls {
		seen, err := runUnary(chainCtxFrom(conn, imp, []*x509.Certificate{imp, anchor}, c.md), methodVersion, nil, unary)
		if status.Code(err) != c.code {
			t.Fatalf("%s: %v, want %v", c.name, err, c.code)
		}

		if c.code != codes.OK {
			continue
		}

		roles, _ := authz.RolesFromContext(seen)
		caller, _ := authz.CallerFromContext(seen)

		if roles.String() != c.roles || caller.Subject != c.caller || !authz.Impersonated(seen) {
			t.Fatalf("%s: roles %s, caller %q, impersonated %v; want %s, %q, true",
				c.name, roles, caller.Subject, authz.Impersonated(seen), c.roles, c.caller)
		}
	}
}

// TestConnMemoFollowsTheCertificate: a memo holds the facts of the
// certificate it was filled for and never answers for another. One memo
// under two peers stands for a misuse (a memo shared by connections):
// each call must still get its own certificate's roles and name.
func TestConnMemoFollowsTheCertificate(t *testing.T) {
	p := newPKI(t)
	admin, reader := p.client(t, role.Admin), p.client(t, role.Reader)
	memo := authz.ContextWithConnMemo(context.Background())
	unary, _ := chain(nil, authz.FromCertificate)

	for _, c := range []struct {
		name  string
		leaf  *x509.Certificate
		roles string
	}{{"admin", admin, "os:admin"}, {"reader", reader, "os:reader"}, {"admin again", admin, "os:admin"}} {
		seen, err := runUnary(chainCtxFrom(memo, c.leaf, []*x509.Certificate{c.leaf, anchor}, nil), methodRestart, nil, unary)
		if c.roles == "os:reader" {
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("%s: restart %v, want PermissionDenied", c.name, err)
			}

			continue
		}

		roles, _ := authz.RolesFromContext(seen)
		caller, _ := authz.CallerFromContext(seen)

		if err != nil || roles.String() != c.roles || caller.Subject != c.leaf.Subject.String() {
			t.Fatalf("%s: %v, roles %s, caller %s; want %s, %s", c.name, err, roles, caller.Subject, c.roles, c.leaf.Subject)
		}
	}
}

// BenchmarkChain runs the three interceptors on an admin's call, on a
// connection whose context holds a memo and on one without.
func BenchmarkChain(b *testing.B) {
	admin := newPKI(b).client(b, role.Admin)
	unary, _ := chain(nil, authz.FromCertificate)

	for name, parent := range map[string]context.Context{
		"memo":    authz.ContextWithConnMemo(context.Background()),
		"no-memo": context.Background(),
	} {
		ctx := chainCtxFrom(parent, admin, []*x509.Certificate{admin, anchor}, metadata.Pairs("x-request", "1"))

		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()

			for b.Loop() {
				if _, err := runUnary(ctx, methodVersion, nil, unary); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
