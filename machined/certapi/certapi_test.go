package certapi

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// authority is a control plane's CA, a worker (no CA) or a broken node.
type authority struct {
	iss *ca.Issuer
	err error
}

func (a authority) ClientIssuer() (*ca.Issuer, []byte, error) {
	if a.err != nil {
		return nil, nil, a.err
	}

	return a.iss, a.iss.CA().CertPEM, nil
}

func TestDefaultMaxTTLIsTheClientProfiles(t *testing.T) {
	if DefaultMaxTTL != ca.DefaultsFor(ca.ProfileClient).MaxTTL {
		t.Fatalf("DefaultMaxTTL %s differs from the client profile's maximum %s", DefaultMaxTTL, ca.DefaultsFor(ca.ProfileClient).MaxTTL)
	}
}

// presented is a client certificate of cn with roles that lives ttl, as
// apid would pass it on.
func presented(t *testing.T, iss *ca.Issuer, profile ca.Profile, cn string, ttl time.Duration, roles ...role.Role) *x509.Certificate {
	t.Helper()

	csr, err := ca.ParseCSR(catest.CSR(t, catest.Key(t, ca.Ed25519), &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}))
	if err != nil {
		t.Fatal(err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: profile, Roles: role.NewSet(roles...), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}

	return issued.Cert
}

// unknownRoles is a certificate whose Organization names no known role,
// which no Aegis CA issues.
func unknownRoles(t *testing.T) *x509.Certificate {
	t.Helper()

	key := catest.Key(t, ca.Ed25519)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "alice", Organization: []string{"os:root"}},
		NotBefore: testutil.Epoch, NotAfter: testutil.Epoch.Add(time.Hour),
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	return cert
}

// callContext is a call as machined receives it from apid: the roles apid
// decided (talos-role) and the certificate it verified.
func callContext(roles role.Set, cert *x509.Certificate) context.Context {
	md := metadata.MD{}
	authz.SetCertificateMetadata(md, cert)

	ctx := metadata.NewIncomingContext(context.Background(), md)
	if roles != nil {
		ctx = authz.ContextWithRoles(ctx, roles)
	}

	return ctx
}

func TestRenew(t *testing.T) {
	now := testutil.Epoch
	iss := catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour)), now)
	key := catest.Key(t, ca.Ed25519)
	good := catest.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice", Organization: []string{"os:admin"}}})
	readerOperator := role.NewSet(role.Reader, role.Operator)
	yearly := presented(t, iss, ca.ProfileClient, "alice", DefaultMaxTTL, role.Reader, role.Operator)
	tenMinutes := presented(t, iss, ca.ProfileClient, "alice", 10*time.Minute, role.Reader, role.Operator)
	impersonator := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileImpersonator, time.Hour).Cert

	tests := []struct {
		name      string
		authority authority
		maxTTL    time.Duration
		roles     role.Set // talos-role: never read
		cert      *x509.Certificate
		csr       []byte
		ttl       *durationpb.Duration
		revoked   bool // the presented certificate is on the revocation list
		code      codes.Code
		want      string        // in the error message
		life      time.Duration // of the certificate issued
	}{
		{name: "same roles, lifetime asked", cert: yearly, csr: good, ttl: durationpb.New(time.Hour), life: time.Hour},
		{name: "no lifetime asked gives the presented one", cert: tenMinutes, csr: good, life: 10 * time.Minute},
		{name: "zero lifetime gives the presented one", cert: tenMinutes, csr: good, ttl: durationpb.New(0), life: 10 * time.Minute},
		{name: "never longer than the presented certificate", cert: tenMinutes, csr: good, ttl: durationpb.New(365 * 24 * time.Hour), life: 10 * time.Minute},
		{name: "more than the maximum is cut", cert: yearly, csr: good, maxTTL: 2 * time.Hour, ttl: durationpb.New(10 * time.Hour), life: 2 * time.Hour},
		{name: "no lifetime asked, maximum below the presented", cert: yearly, csr: good, maxTTL: 48 * time.Hour, life: 48 * time.Hour},
		{name: "maximum above the profile's is ignored", cert: yearly, csr: good, maxTTL: 10 * DefaultMaxTTL, ttl: durationpb.New(2 * DefaultMaxTTL), life: DefaultMaxTTL},
		{name: "talos-role is ignored", roles: role.NewSet(role.Admin), cert: tenMinutes, csr: good, life: 10 * time.Minute},
		{name: "too short", cert: yearly, csr: good, ttl: durationpb.New(time.Millisecond), code: codes.InvalidArgument, want: "ttl 1ms is shorter than 1s"},
		{name: "negative", cert: yearly, csr: good, ttl: durationpb.New(-time.Hour), code: codes.InvalidArgument, want: "shorter"},
		{name: "invalid duration", cert: yearly, csr: good, ttl: &durationpb.Duration{Seconds: 1, Nanos: -1}, code: codes.InvalidArgument, want: "ttl"},
		{name: "no certificate passed on", roles: readerOperator, csr: good, code: codes.PermissionDenied, want: "client certificate"},
		{
			name: "impersonator, whatever talos-role says", roles: role.NewSet(role.Admin), cert: impersonator, csr: good,
			code: codes.PermissionDenied, want: "os:impersonator certificate cannot be renewed",
		},
		{name: "revoked certificate", cert: yearly, csr: good, revoked: true, code: codes.PermissionDenied, want: "is revoked"},
		{name: "certificate without known roles", cert: unknownRoles(t), csr: good, code: codes.PermissionDenied, want: "roles"},
		{name: "garbage CSR", cert: yearly, csr: []byte("nope"), code: codes.InvalidArgument, want: "PEM"},
		{
			name: "CSR naming hosts", cert: yearly, code: codes.InvalidArgument, want: "names no hosts; the request names evil.example",
			csr: catest.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}, DNSNames: []string{"evil.example"}}),
		},
		{
			name: "CSR of another name", cert: yearly, code: codes.InvalidArgument, want: `common name "root" is not the certificate's "alice"`,
			csr: catest.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "root"}}),
		},
		{name: "worker", authority: authority{err: ErrNoCA}, cert: yearly, csr: good, code: codes.FailedPrecondition, want: "use a control-plane endpoint"},
		{name: "clock not synced", authority: authority{err: ErrTimeNotSynced}, cert: yearly, csr: good, code: codes.FailedPrecondition, want: "time not synced"},
		{name: "broken node", authority: authority{err: errors.New("disk on fire")}, cert: yearly, csr: good, code: codes.Internal, want: "internal error"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.authority.iss == nil && tt.authority.err == nil {
				tt.authority.iss = iss
			}

			var sink logtest.Sink

			revoked := func(serial string) bool {
				return tt.revoked && tt.cert != nil && serial == tt.cert.SerialNumber.Text(16)
			}
			reg := prometheus.NewRegistry()
			counted, err := metrics.NewClientCertificates(reg)
			if err != nil {
				t.Fatal(err)
			}
			s := New(Config{Authority: tt.authority, MaxTTL: tt.maxTTL, Revoked: revoked, Logger: sink.Logger(), Counted: counted})

			resp, err := s.Renew(callContext(tt.roles, tt.cert), &certificates.RenewRequest{Csr: tt.csr, Ttl: tt.ttl})
			checkCounted(t, reg, tt.code)
			if tt.code != codes.OK {
				checkRefusal(t, &sink, err, tt.code, tt.want)

				return
			}

			checkIssued(t, &sink, resp, err, key.Public(), tt.life)

			if recs := sink.Find(t, msgRenewed, logkey.AskingSerial, tt.cert.SerialNumber.Text(16), logkey.AskingCommonName, "alice"); len(recs) != 1 {
				t.Fatalf("the record does not name the asking certificate: %v", sink.Records(t))
			}
		})
	}
}

// checkCounted checks that the one renewal counts once, as the outcome
// its code says: issued, failed for the node's own error, else refused.
func checkCounted(t *testing.T, reg *prometheus.Registry, code codes.Code) {
	t.Helper()

	outcome := metrics.OutcomeRefused
	switch code {
	case codes.OK:
		outcome = metrics.OutcomeIssued
	case codes.Internal:
		outcome = metrics.OutcomeFailed
	}

	fams := metricstest.Gather(t, reg)
	for _, o := range []string{metrics.OutcomeIssued, metrics.OutcomeRefused, metrics.OutcomeFailed} {
		want := boolCount(o == outcome)
		if got := fams.Must(t, metrics.ClientCertificates, metrics.LabelOperation, metrics.OperationRenew, metrics.LabelOutcome, o); got != want {
			t.Errorf("renewals %s = %v, want %v", o, got, want)
		}
	}
}

func boolCount(b bool) float64 {
	if b {
		return 1
	}

	return 0
}

func checkRefusal(t *testing.T, sink *logtest.Sink, err error, code codes.Code, want string) {
	t.Helper()

	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("err = %v, want %s mentioning %q", err, code, want)
	}

	if recs := sink.Find(t, msgRefused, logkey.RefusalCode, code.String()); len(recs) != 1 {
		t.Fatalf("want one refusal record with code %s, have %v", code, sink.Records(t))
	}

	if code != codes.Internal {
		return
	}

	ref := regexp.MustCompile(`^machined: internal error \(ref ([0-9a-f]{20})\)$`).FindStringSubmatch(status.Convert(err).Message())
	if ref == nil || len(sink.Find(t, msgRefused, logkey.Reason, "disk on fire", logkey.RequestID, ref[1])) != 1 {
		t.Fatalf("want one record with the cause of an internal failure and the reference the caller read (%v):\n%s", err, sink)
	}
}

func checkIssued(t *testing.T, sink *logtest.Sink, resp *certificates.RenewResponse, err error, pub any, life time.Duration) {
	t.Helper()

	if err != nil {
		t.Fatal(err)
	}

	if len(resp.GetMessages()) != 1 || len(resp.GetMessages()[0].GetCa()) == 0 {
		t.Fatalf("reply: %v", resp)
	}

	cert, err := ca.ParseCertificate(resp.GetMessages()[0].GetCrt())
	if err != nil {
		t.Fatal(err)
	}

	org := slices.Sorted(slices.Values(cert.Subject.Organization))

	switch {
	case !slices.Equal(org, []string{"os:operator", "os:reader"}):
		t.Fatalf("roles %q, want the caller's and never the CSR's", org)
	case cert.NotAfter.Sub(cert.NotBefore) != life:
		t.Fatalf("lifetime %s, want %s", cert.NotAfter.Sub(cert.NotBefore), life)
	case !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}):
		t.Fatalf("extended key usage %v", cert.ExtKeyUsage)
	case !cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub):
		t.Fatal("certificate is not for the request's key")
	case cert.Subject.CommonName != "alice":
		t.Fatalf("common name %q", cert.Subject.CommonName)
	}

	if recs := sink.Find(t, msgRenewed, logkey.CommonName, "alice", logkey.Roles, "os:operator,os:reader"); len(recs) != 1 {
		t.Fatalf("want one issuance record, have %v", sink.Records(t))
	}
}
