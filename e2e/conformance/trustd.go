package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd"
)

// tokenSet holds the tokens the trustd cases present, made through the
// TokenService before the cases run.
type tokenSet struct {
	valid, restricted, expired, revoked, usedUp, race string
}

// restrictedSANs are the names the restricted token allows.
var restrictedSANs = []string{"conformance-*.example", "127.8.0.0/16"}

// prepareTokens makes the tokens through the target's TokenService (apid,
// then machined, then trustd) and spends the single use of the used-up
// one.
func (e *Env) prepareTokens(ctx context.Context) error {
	conn, err := e.admin(e.Target)
	if err != nil {
		return err
	}

	tc := tokens.NewTokenServiceClient(conn)
	create := func(dst *string, req *tokens.CreateRequest) error {
		req.Description = "conformance"

		resp, err := tc.Create(ctx, req)
		if err != nil {
			return fmt.Errorf("creating a token: %w", err)
		}

		if len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetToken() == "" {
			return fmt.Errorf("creating a token: %d replies without a token", len(resp.GetMessages()))
		}

		*dst = resp.GetMessages()[0].GetToken()

		return nil
	}

	expiresAt := time.Now().Add(time.Second)

	for _, t := range []struct {
		dst *string
		req *tokens.CreateRequest
	}{
		{&e.tokens.expired, &tokens.CreateRequest{Ttl: durationpb.New(time.Second)}},
		{&e.tokens.valid, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour)}},
		{&e.tokens.restricted, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour), AllowedSans: restrictedSANs}},
		{&e.tokens.revoked, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour)}},
		{&e.tokens.usedUp, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour), MaxUses: 1}},
		{&e.tokens.race, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour), MaxUses: 1}},
	} {
		if err = create(t.dst, t.req); err != nil {
			return err
		}
	}

	if _, err = tc.Revoke(ctx, &tokens.RevokeRequest{Id: e.tokens.revoked[:6]}); err != nil {
		return fmt.Errorf("revoking a token: %w", err)
	}

	if err = e.spend(ctx, e.tokens.usedUp); err != nil {
		return err
	}

	// The expired token must have expired before any case uses it.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(expiresAt) + 500*time.Millisecond):
	}

	return nil
}

// spend obtains one certificate with tok, from a source of its own.
func (e *Env) spend(ctx context.Context, tok string) error {
	source, err := e.sources.take()
	if err != nil {
		return err
	}

	csr, err := goodCSR(source)
	if err != nil {
		return err
	}

	if _, err = e.certify(ctx, e.Target, source, []string{wire.MetadataToken, tok}, csr); err != nil {
		return fmt.Errorf("spending a token: %w", err)
	}

	return nil
}

// trustdConn dials node's trustd from source, verifying trustd's
// certificate against the cluster's CAs; the caller closes it.
func (e *Env) trustdConn(node, source string) (*grpc.ClientConn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	cfg := &tls.Config{RootCAs: e.roots, ServerName: node, MinVersion: tls.VersionTLS13}

	return grpc.NewClient(trustdAddr(node),
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }),
	)
}

// certify makes one Certificate call to node's trustd from source with
// metadata md.
func (e *Env) certify(ctx context.Context, node, source string, md []string, csr []byte) (*securityapi.CertificateResponse, error) {
	conn, err := e.trustdConn(node, source)
	if err != nil {
		return nil, err
	}
	defer conn.Close() //nolint:errcheck // one call

	return securityapi.NewSecurityServiceClient(conn).Certificate(withMetadata(ctx, md...), &securityapi.CertificateRequest{Csr: csr})
}

// checkIssued checks a certificate trustd returned: a node certificate of
// the server profile, with none of the CSR's authority, chaining to the
// cluster's CA.
func (e *Env) checkIssued(resp *securityapi.CertificateResponse, r *Report) {
	cert, err := ca.ParseCertificate(resp.GetCrt())
	if err != nil {
		r.Problemf("issued certificate: %v", err)

		return
	}

	switch {
	case cert.IsCA || len(cert.Subject.Organization) != 0:
		r.Problemf("issued certificate is a CA or carries an Organization (%q)", cert.Subject.Organization)
	case len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth:
		r.Problemf("issued certificate has extended key usage %v, want ServerAuth only", cert.ExtKeyUsage)
	case cert.NotAfter.Sub(cert.NotBefore) > trustd.MaxCertTTL:
		r.Problemf("issued certificate lives %s", cert.NotAfter.Sub(cert.NotBefore))
	}

	if _, err = cert.Verify(x509.VerifyOptions{Roots: e.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		r.Problemf("issued certificate does not verify: %v", err)
	}
}

// auditWait bounds the wait for audit records: trustd writes a record
// before it answers, but the record travels through machined's log
// capture, and a call gRPC refused before the handler ran is recorded as
// the call ends on the server, possibly after the client saw the refusal.
const auditWait = 15 * time.Second

// checkAudit checks the decisions node's trustd recorded about source
// after the first skip records: one per call, each with the code the call
// got.
func (e *Env) checkAudit(ctx context.Context, node, source string, skip int, codes []string, r *Report) {
	var recs []auditRecord

	err := e.poll(ctx, auditWait, func() error {
		var err error
		if recs, err = e.auditFrom(ctx, node, source, skip); err != nil || len(recs) >= len(codes) {
			return err
		}

		return fmt.Errorf("%d audit records from %s, want %d", len(recs), source, len(codes))
	})
	if err != nil {
		r.Problemf("%v", err)

		return
	}

	if len(recs) != len(codes) {
		r.Problemf("%d audit records from %s, want %d", len(recs), source, len(codes))

		return
	}

	for i, rec := range recs {
		want := "refused"
		if codes[i] == "OK" {
			want = "issued"
		}

		if rec.str(auditDecision) != want || (want == "refused" && rec.str(auditCode) != codes[i]) {
			r.Problemf("audit record %d: decision %s code %s, want %s %s", i, rec.str(auditDecision), rec.str(auditCode), want, codes[i])
		}
	}
}

// auditCount returns how many decisions node's trustd has recorded.
func (e *Env) auditCount(ctx context.Context, node string) (int, error) {
	recs, err := e.audit(ctx, node)

	return len(recs), err
}
