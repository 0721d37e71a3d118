package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
)

const (
	methodVersion = machine.MachineService_Version_FullMethodName
	methodRestart = machine.MachineService_ServiceRestart_FullMethodName
)

// pki mints the certificates the tests present.
type pki struct {
	iss *ca.Issuer
}

func newPKI(tb testing.TB) *pki {
	tb.Helper()

	c := catest.NewCA(tb, ca.Ed25519, testutil.Epoch)

	return &pki{iss: catest.NewIssuer(tb, c, testutil.Epoch)}
}

func (p *pki) client(tb testing.TB, roles ...role.Role) *x509.Certificate {
	tb.Helper()

	return catest.Issue(tb, p.iss, catest.Key(tb, ca.Ed25519), ca.ProfileClient, time.Hour, roles...).Cert
}

func (p *pki) impersonator(t *testing.T) *x509.Certificate {
	t.Helper()

	return catest.Issue(t, p.iss, catest.Key(t, ca.Ed25519), ca.ProfileImpersonator, time.Hour).Cert
}

// anchor stands for the accepted CA at the end of a verified chain: the
// interceptors look at the chain's shape, crypto/tls has checked the rest.
var anchor = &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}

// peerCtx is the context of a call from a TLS peer presenting leaf,
// verified (as signed directly by an accepted CA) or not, with incoming
// metadata md.
func peerCtx(leaf *x509.Certificate, verified bool, md metadata.MD) context.Context {
	if !verified {
		return chainCtx(leaf, nil, md)
	}

	return chainCtx(leaf, []*x509.Certificate{leaf, anchor}, md)
}

// chainCtx is the context of a call from a TLS peer presenting leaf whose
// handshake verified chain.
func chainCtx(leaf *x509.Certificate, chain []*x509.Certificate, md metadata.MD) context.Context {
	return chainCtxFrom(context.Background(), leaf, chain, md)
}

// chainCtxFrom is chainCtx in a context derived from parent.
func chainCtxFrom(parent context.Context, leaf *x509.Certificate, chain []*x509.Certificate, md metadata.MD) context.Context {
	var state tls.ConnectionState
	if leaf != nil {
		state.PeerCertificates = []*x509.Certificate{leaf}
		if chain != nil {
			state.VerifiedChains = [][]*x509.Certificate{chain}
		}
	}

	ctx := peer.NewContext(parent, &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(127, 0, 2, 99), Port: 40000},
		AuthInfo: credentials.TLSInfo{State: state},
	})

	if md != nil {
		ctx = metadata.NewIncomingContext(ctx, md)
	}

	return ctx
}

// chain is the apid interceptor chain without logging and recovery.
func chain(log *slog.Logger, mode authz.Mode) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	a := authz.NewAuthenticator(authz.AuthenticatorConfig{Logger: log})
	i := authz.NewInjector(authz.InjectorConfig{Mode: mode, Logger: log})
	z := authz.NewAuthorizer(authz.AuthorizerConfig{Logger: log})

	if mode == authz.FromTrustedMetadata {
		return []grpc.UnaryServerInterceptor{i.UnaryServerInterceptor(), z.UnaryServerInterceptor()},
			[]grpc.StreamServerInterceptor{i.StreamServerInterceptor(), z.StreamServerInterceptor()}
	}

	return []grpc.UnaryServerInterceptor{a.UnaryServerInterceptor(), i.UnaryServerInterceptor(), z.UnaryServerInterceptor()},
		[]grpc.StreamServerInterceptor{a.StreamServerInterceptor(), i.StreamServerInterceptor(), z.StreamServerInterceptor()}
}

// runUnary runs ctx through the interceptors and returns the context the
// handler saw, or the refusal.
func runUnary(ctx context.Context, method string, server any, chain []grpc.UnaryServerInterceptor) (context.Context, error) {
	var seen context.Context

	handler := grpc.UnaryHandler(func(ctx context.Context, _ any) (any, error) {
		seen = ctx

		return "ok", nil
	})

	for i := len(chain) - 1; i >= 0; i-- {
		next, icpt := handler, chain[i]
		handler = func(ctx context.Context, req any) (any, error) {
			return icpt(ctx, req, &grpc.UnaryServerInfo{FullMethod: method, Server: server}, next)
		}
	}

	_, err := handler(ctx, nil)

	return seen, err
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func runStream(ctx context.Context, method string, chain []grpc.StreamServerInterceptor) (context.Context, error) {
	var seen context.Context

	handler := grpc.StreamHandler(func(_ any, ss grpc.ServerStream) error {
		seen = ss.Context()

		return nil
	})

	for i := len(chain) - 1; i >= 0; i-- {
		next, icpt := handler, chain[i]
		handler = func(srv any, ss grpc.ServerStream) error {
			return icpt(srv, ss, &grpc.StreamServerInfo{FullMethod: method, IsServerStream: true}, next)
		}
	}

	err := handler(nil, &fakeStream{ctx: ctx})

	return seen, err
}

func TestCertificateChain(t *testing.T) {
	p := newPKI(t)
	admin := p.client(t, role.Admin)
	reader := p.client(t, role.Reader)
	imp := p.impersonator(t)
	noUsage := p.client(t, role.Admin)
	noUsage.ExtKeyUsage = nil
	caLeaf := p.client(t, role.Admin)
	caLeaf.IsCA, caLeaf.KeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	intermediate := &x509.Certificate{IsCA: true, BasicConstraintsValid: true}

	tests := []struct {
		name      string
		ctx       context.Context
		method    string
		code      codes.Code
		wantRoles string
		imperson  bool
	}{
		{"no peer", context.Background(), methodVersion, codes.Unauthenticated, "", false},
		{"unverified certificate", peerCtx(admin, false, nil), methodVersion, codes.Unauthenticated, "", false},
		{"verified but without ClientAuth", peerCtx(noUsage, true, nil), methodVersion, codes.Unauthenticated, "", false},
		{"CA certificate as client", peerCtx(caLeaf, true, nil), methodVersion, codes.Unauthenticated, "", false},
		{"accepted CA as its own leaf", chainCtx(anchor, []*x509.Certificate{anchor}, nil), methodVersion, codes.Unauthenticated, "", false},
		{
			"chain through an intermediate", chainCtx(admin, []*x509.Certificate{admin, intermediate, anchor}, nil),
			methodVersion, codes.Unauthenticated, "", false,
		},
		{"admin", peerCtx(admin, true, nil), methodRestart, codes.OK, "os:admin", false},
		{"reader reads", peerCtx(reader, true, nil), methodVersion, codes.OK, "os:reader", false},
		{"reader cannot restart", peerCtx(reader, true, nil), methodRestart, codes.PermissionDenied, "", false},
		{
			"reader's talos-role ignored", peerCtx(reader, true, metadata.Pairs(wire.MetadataRole, "os:admin")),
			methodRestart, codes.PermissionDenied, "", false,
		},
		{
			"reader's talos-role gains nothing on reads", peerCtx(reader, true, metadata.Pairs(wire.MetadataRole, "os:admin")),
			methodVersion, codes.OK, "os:reader", false,
		},
		{"impersonator alone is nothing", peerCtx(imp, true, nil), methodVersion, codes.PermissionDenied, "", false},
		{
			"impersonator passes reader", peerCtx(imp, true, metadata.Pairs(wire.MetadataRole, "os:reader")),
			methodVersion, codes.OK, "os:reader", true,
		},
		{
			"impersonator passes operator", peerCtx(imp, true, metadata.Pairs(wire.MetadataRole, "os:reader", wire.MetadataRole, "os:operator")),
			methodRestart, codes.OK, "os:operator,os:reader", true,
		},
		{
			"impersonator cannot pass impersonator", peerCtx(imp, true, metadata.Pairs(wire.MetadataRole, "os:impersonator,os:reader")),
			methodVersion, codes.OK, "os:reader", true,
		},
		{
			"impersonator passing no known role", peerCtx(imp, true, metadata.Pairs(wire.MetadataRole, "root")),
			methodVersion, codes.PermissionDenied, "", true,
		},
		{
			"too many roles", peerCtx(imp, true, metadata.Pairs(wire.MetadataRole, strings.Repeat("os:reader,", authz.MaxMetadataRoles+1))),
			methodVersion, codes.InvalidArgument, "", false,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unary, stream := chain(nil, authz.FromCertificate)

			for kind, run := range map[string]func() (context.Context, error){
				"unary":  func() (context.Context, error) { return runUnary(tt.ctx, tt.method, nil, unary) },
				"stream": func() (context.Context, error) { return runStream(tt.ctx, tt.method, stream) },
			} {
				seen, err := run()
				if got := status.Code(err); got != tt.code {
					t.Fatalf("%s: code %v, want %v (%v)", kind, got, tt.code, err)
				}

				if tt.code != codes.OK {
					if seen != nil {
						t.Fatalf("%s: handler ran after a refusal", kind)
					}

					continue
				}

				roles, ok := authz.RolesFromContext(seen)
				if !ok || roles.String() != tt.wantRoles {
					t.Fatalf("%s: roles %v (set %v), want %s", kind, roles, ok, tt.wantRoles)
				}

				if authz.Impersonated(seen) != tt.imperson {
					t.Fatalf("%s: Impersonated = %v", kind, !tt.imperson)
				}
			}
		})
	}
}

func TestTrustedMetadataChain(t *testing.T) {
	tests := []struct {
		name  string
		md    metadata.MD
		code  codes.Code
		roles string
	}{
		{"no metadata", nil, codes.PermissionDenied, ""},
		{"reader", metadata.Pairs(wire.MetadataRole, "os:reader"), codes.OK, "os:reader"},
		{"comma separated", metadata.Pairs(wire.MetadataRole, "os:reader, os:admin"), codes.OK, "os:admin,os:reader"},
		{"unknown only", metadata.Pairs(wire.MetadataRole, "os:root"), codes.PermissionDenied, ""},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unary, stream := chain(nil, authz.FromTrustedMetadata)

			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}

			seen, err := runUnary(ctx, methodVersion, nil, unary)
			if status.Code(err) != tt.code {
				t.Fatalf("unary: %v, want %v", err, tt.code)
			}

			if _, serr := runStream(ctx, methodVersion, stream); status.Code(serr) != tt.code {
				t.Fatalf("stream: %v, want %v", serr, tt.code)
			}

			if tt.code == codes.OK {
				if roles, _ := authz.RolesFromContext(seen); roles.String() != tt.roles {
					t.Fatalf("roles %s, want %s", roles, tt.roles)
				}
			}
		})
	}
}

func TestAuthorizerWithoutInjectorFailsClosed(t *testing.T) {
	z := authz.NewAuthorizer(authz.AuthorizerConfig{})

	_, err := runUnary(context.Background(), methodVersion, nil, []grpc.UnaryServerInterceptor{z.UnaryServerInterceptor()})
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary without roles: %v, want Internal", err)
	}

	_, err = runStream(context.Background(), methodVersion, []grpc.StreamServerInterceptor{z.StreamServerInterceptor()})
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream without roles: %v, want Internal", err)
	}
}

// overridingService would skip every check if go-grpc-middleware's auth
// interceptor were allowed to see it.
type overridingService struct{}

func (overridingService) AuthFuncOverride(ctx context.Context, _ string) (context.Context, error) {
	return authz.ContextWithRoles(ctx, role.NewSet(role.Admin)), nil
}

func TestServiceCannotOverrideChecks(t *testing.T) {
	unary, _ := chain(nil, authz.FromCertificate)

	_, err := runUnary(context.Background(), methodRestart, overridingService{}, unary)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("service override bypassed authentication: %v", err)
	}
}

func TestDenialIsAudited(t *testing.T) {
	var sink logtest.Sink

	p := newPKI(t)
	unary, _ := chain(sink.Logger(), authz.FromCertificate)

	_, err := runUnary(peerCtx(p.client(t, role.Reader), true, nil), methodRestart, nil, unary)

	st, _ := status.FromError(err)
	if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), methodRestart) ||
		!strings.Contains(st.Message(), "os:operator") {
		t.Fatalf("refusal %v does not name the method and the allowed roles", err)
	}

	rec := sink.First(t, "permission denied")
	if rec == nil {
		t.Fatalf("no audit record; log: %v", sink.Records(t))
	}

	if rec[logkey.Method] != methodRestart || rec[logkey.Roles] != "os:reader" || rec[logkey.Allowed] != "os:admin,os:operator" {
		t.Fatalf("audit record %v", rec)
	}
}

func TestIgnoredMetadataAndUnknownRolesAreLogged(t *testing.T) {
	var sink logtest.Sink

	p := newPKI(t)
	unary, _ := chain(sink.Logger(), authz.FromCertificate)
	odd := catest.Issue(t, p.iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Reader).Cert
	odd.Subject.Organization = append(odd.Subject.Organization, "os:superuser")

	if _, err := runUnary(peerCtx(odd, true, metadata.Pairs(wire.MetadataRole, "os:admin")), methodVersion, nil, unary); err != nil {
		t.Fatal(err)
	}

	if sink.First(t, "unknown roles in client certificate ignored") == nil {
		t.Error("unknown Organization value not logged")
	}

	if sink.First(t, "talos-role metadata ignored: the peer is not an impersonator") == nil {
		t.Error("ignored talos-role metadata not logged")
	}
}

func TestSetMetadataReplaces(t *testing.T) {
	md := metadata.Pairs(wire.MetadataRole, "os:admin")
	authz.SetMetadata(md, role.NewSet(role.Reader))

	if got := md.Get(wire.MetadataRole); len(got) != 1 || got[0] != "os:reader" {
		t.Fatalf("talos-role = %v", got)
	}

	authz.SetMetadata(md, role.NewSet())

	if got := md.Get(wire.MetadataRole); len(got) != 0 {
		t.Fatalf("empty set left talos-role = %v", got)
	}
}

func FuzzParseMetadataRoles(f *testing.F) {
	f.Add("os:admin", "os:reader,os:operator")
	f.Add("", ",,,")
	f.Add("os:impersonator", " os:etcd:backup ")
	f.Add(strings.Repeat("os:reader,", 20), "x")

	f.Fuzz(func(t *testing.T, a, b string) {
		roles, ignored, err := authz.ParseMetadataRoles([]string{a, b})
		if err != nil {
			return
		}

		if roles.Has(role.Impersonator) {
			t.Fatal("os:impersonator accepted from metadata")
		}

		for r := range roles {
			if !r.Known() {
				t.Fatalf("unknown role %q accepted", r)
			}
		}

		if len(roles)+len(ignored) > authz.MaxMetadataRoles {
			t.Fatalf("%d names accepted, limit %d", len(roles)+len(ignored), authz.MaxMetadataRoles)
		}
	})
}
