package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/wire"
)

// The authority tests' cluster (one control plane) lives in
// 127.6.2.0/28; the fake endpoint stands at 127.6.2.14.
const (
	authorityCIDR = "127.6.2.0/28"
	fakeAddr      = "127.6.2.14"
)

// TestAuthority drives what a certificate holder can obtain against real
// processes: what the static token gets from trustd, what a renewal keeps,
// and that a renewal never changes what a client trusts, even from an
// endpoint that holds a certificate the client accepts.
func TestAuthority(t *testing.T) {
	c := startClusterIn(t, "authority", authorityCIDR, 0)

	mc, err := certs.LoadMachineConfig(c.ConfigPath(c.Nodes[0]), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("fake endpoint cannot change the trusted CAs", func(t *testing.T) { fakeEndpoint(t, c, mc) })
	t.Run("renewal keeps roles, name and lifetime", func(t *testing.T) { renewalKeeps(t, c) })
	t.Run("talos-role ignored, impersonator refused", func(t *testing.T) { renewalIdentity(t, c, mc) })
	t.Run("bad crt_ttl is InvalidArgument", func(t *testing.T) { badCrtTTL(t, c) })
}

// joinAs asks the control plane's trustd for a server certificate with the
// static token every worker holds, calling from source.
func joinAs(t *testing.T, c *cliCluster, mc *certs.MachineConfig, source string, sans ...string) (*join.Result, error) {
	t.Helper()

	jc, err := join.New(join.Config{
		Endpoints: []string{c.Nodes[0].Address}, Token: mc.TrustdToken(), CAs: mc.AcceptedCAs(), CA: mc.CACertificate(),
		Hostname: sans[0], SANs: sans[1:], Source: source, MaxAttempts: 1, RetryMin: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	return jc.Join(testContext(t))
}

// fakeEndpoint: a worker's static token buys a certificate for the
// worker's own address only; an endpoint serving renewals with it and a CA
// of its own cannot make aegisctl trust that CA.
func fakeEndpoint(t *testing.T, c *cliCluster, mc *certs.MachineConfig) {
	cp := c.Nodes[0].Address

	if _, err := joinAs(t, c, mc, fakeAddr, fakeAddr, cp); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), cp) {
		t.Fatalf("static token, certificate naming the control plane %s: %v, want PermissionDenied naming it", cp, err)
	}

	if _, err := joinAs(t, c, mc, fakeAddr, "127.6.2.15"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("static token, certificate for another address than the caller's: %v, want InvalidArgument", err)
	}

	res, err := joinAs(t, c, mc, fakeAddr, fakeAddr)
	if err != nil {
		t.Fatalf("static token, the caller's own address: %v", err)
	}

	evil, err := ca.Generate(ca.Config{CommonName: "evil CA"})
	if err != nil {
		t.Fatal(err)
	}

	serveFakeRenewals(t, res, evil)

	victim := c.configNew(t, "victim", "--roles", "os:reader", "--crt-ttl", "1h")

	before, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}

	r := c.ctl(t, victim, "-e", fakeAddr, "config", "renew")
	if r.code == 0 || !strings.Contains(r.stderr, "does not chain to a CA the context trusts") {
		t.Fatalf("renewal from the fake endpoint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	after, err := os.ReadFile(victim)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the client config changed after a refused renewal (%v)", err)
	}
}

// fakeRenewals answers every renewal with a certificate that passes every
// check but the chain (the roles, name and lifetime asked for) from a CA
// of its own, and that CA as the one to trust.
type fakeRenewals struct {
	certificates.UnimplementedCertificateServiceServer

	evil *ca.CA
}

func (f fakeRenewals) Renew(_ context.Context, req *certificates.RenewRequest) (*certificates.RenewResponse, error) {
	csr, err := ca.ParseCSR(req.GetCsr())
	if err != nil {
		return nil, err
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: f.evil})
	if err != nil {
		return nil, err
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: role.NewSet(role.Reader), TTL: req.GetTtl().AsDuration()})
	if err != nil {
		return nil, err
	}

	return &certificates.RenewResponse{Messages: []*certificates.Renewed{{Crt: issued.PEM, Ca: f.evil.CertPEM}}}, nil
}

// serveFakeRenewals stands up the fake endpoint on fakeAddr's API port with
// the certificate trustd signed.
func serveFakeRenewals(t *testing.T, res *join.Result, evil *ca.CA) {
	t.Helper()

	pair, err := tls.X509KeyPair(res.CertPEM, res.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}

	lis, err := net.Listen("tcp", net.JoinHostPort(fakeAddr, strconv.Itoa(wire.APIDPort)))
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13,
	})))
	certificates.RegisterCertificateServiceServer(g, fakeRenewals{evil: evil})

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)
}

// renewalKeeps: a ten-minute certificate renews into one of at most ten
// minutes, with the same roles and name, and the context's CAs unchanged.
func renewalKeeps(t *testing.T, c *cliCluster) {
	path := c.configNew(t, "ten", "--roles", "os:operator,os:reader", "--crt-ttl", "10m")
	old := clientCert(t, path)
	oldCA := contextOf(t, path).CA

	c.ok(t, path, "config", "renew")

	renewed := clientCert(t, path)
	life := renewed.NotAfter.Sub(renewed.NotBefore)

	switch {
	case renewed.SerialNumber.Cmp(old.SerialNumber) == 0:
		t.Fatal("not renewed")
	case life > 10*time.Minute:
		t.Fatalf("a ten-minute certificate renewed into one of %s", life)
	case !slices.Equal(slices.Sorted(slices.Values(renewed.Subject.Organization)), []string{"os:operator", "os:reader"}):
		t.Fatalf("roles %v after renewal", renewed.Subject.Organization)
	case renewed.Subject.CommonName != old.Subject.CommonName:
		t.Fatalf("common name %q after renewal, was %q", renewed.Subject.CommonName, old.Subject.CommonName)
	case !bytes.Equal(contextOf(t, path).CA, oldCA):
		t.Fatal("the renewal changed the context's CAs")
	}
}

// renewalIdentity calls Renew directly with the Talos client: talos-role
// metadata and asking for a year gain a one-hour reader nothing, and a
// node's impersonator certificate cannot renew whatever roles it passes.
func renewalIdentity(t *testing.T, c *cliCluster, mc *certs.MachineConfig) {
	reader := contextOf(t, c.configNew(t, "reader", "--roles", "os:reader", "--crt-ttl", "1h"))

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: mc.OSCA()})
	if err != nil {
		t.Fatal(err)
	}

	impCrt, impKey := impersonatorPair(t, iss)

	tests := []struct {
		name     string
		crt, key []byte
		code     codes.Code
	}{
		{name: "reader sending talos-role os:admin", crt: reader.Crt, key: reader.Key},
		{name: "impersonator sending talos-role os:admin", crt: impCrt, key: impKey, code: codes.PermissionDenied},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.ParseCertificate(tt.crt)
			if err != nil {
				t.Fatal(err)
			}

			resp, err := renewDirect(t, c, reader.CA, tt.crt, tt.key, cert.Subject.CommonName)
			if status.Code(err) != tt.code {
				t.Fatalf("Renew: %v, want %s", err, tt.code)
			}

			if tt.code != codes.OK {
				return
			}

			renewed, err := ca.ParseCertificate(resp.GetMessages()[0].GetCrt())
			if err != nil {
				t.Fatal(err)
			}

			if !slices.Equal(renewed.Subject.Organization, []string{"os:reader"}) || renewed.NotAfter.Sub(renewed.NotBefore) > time.Hour {
				t.Fatalf("renewed: roles %v, lifetime %s", renewed.Subject.Organization, renewed.NotAfter.Sub(renewed.NotBefore))
			}
		})
	}
}

// impersonatorPair is a node's forwarding certificate, os:impersonator.
func impersonatorPair(t *testing.T, iss *ca.Issuer) (crt, key []byte) {
	t.Helper()

	k, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		t.Fatal(err)
	}

	csrPEM, err := ca.NewCSR(k, "authority-cp", nil)
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileImpersonator, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	key, err = ca.EncodeKey(k)
	if err != nil {
		t.Fatal(err)
	}

	return issued.PEM, key
}

// renewDirect sends one Renew through the control plane's apid with
// talos-role: os:admin in its metadata, asking for a year.
func renewDirect(t *testing.T, c *cliCluster, caPEM, crt, key []byte, cn string) (*certificates.RenewResponse, error) {
	t.Helper()

	cl := cpClient(t, c, caPEM, crt, key)

	k, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.NewCSR(k, cn, nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx := metadata.AppendToOutgoingContext(testContext(t), wire.MetadataRole, string(role.Admin))

	return certificates.NewCertificateServiceClient(cl.Conn()).Renew(ctx, &certificates.RenewRequest{Csr: csr, Ttl: durationpb.New(365 * 24 * time.Hour)})
}

// cpClient is the Talos machinery client on the control plane with the
// given credentials.
func cpClient(t *testing.T, c *cliCluster, caPEM, crt, key []byte) *client.Client {
	t.Helper()

	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	cl, err := client.New(testContext(t), client.WithEndpoints(c.Nodes[0].Address),
		client.WithTLSConfig(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cl.Close() }) //nolint:errcheck // the test is done

	return cl
}

// badCrtTTL: a lifetime too short to use, or malformed, is the caller's
// mistake, named as such.
func badCrtTTL(t *testing.T, c *cliCluster) {
	admin := contextOf(t, c.admin())
	cl := cpClient(t, c, admin.CA, admin.Crt, admin.Key)

	for _, ttl := range []*durationpb.Duration{durationpb.New(time.Nanosecond), durationpb.New(time.Millisecond), {Seconds: 1, Nanos: -1}} {
		_, err := cl.GenerateClientConfiguration(testContext(t), &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}, CrtTtl: ttl})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "crt_ttl") {
			t.Errorf("crt_ttl %v: %v, want InvalidArgument naming crt_ttl", ttl, err)
		}
	}

	if r := c.ctl(t, c.admin(), "config", "new", c.dir+"/abc", "--roles", "os:reader", "--crt-ttl", "abc"); r.code == 0 || !strings.Contains(r.stderr, "crt-ttl") {
		t.Errorf("config new --crt-ttl abc: exit %d\n%s", r.code, r.stderr)
	}
}

// contextOf is the current context of the client config at path.
func contextOf(t *testing.T, path string) *certs.ClientContext {
	t.Helper()

	cfg, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	_, ctx, err := cfg.Current()
	if err != nil {
		t.Fatal(err)
	}

	return ctx
}
