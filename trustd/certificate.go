package trustd

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/sanpolicy"
)

// service is the SecurityService the gRPC server exposes.
type service struct {
	securityapi.UnimplementedSecurityServiceServer

	s *Server
}

// Certificate signs a node's CSR for a caller with a valid token.
func (svc service) Certificate(ctx context.Context, in *securityapi.CertificateRequest) (*securityapi.CertificateResponse, error) {
	return svc.s.certificate(ctx, in)
}

// request is one Certificate call on its way through the checks. Each step
// fills in what it learned, so the one audit record written at the end
// holds everything known when the decision fell.
type request struct {
	s      *Server
	ctx    context.Context
	source netip.Addr
	rec    auditRecord
	grant  Grant
	csr    *ca.CSR
}

func (s *Server) certificate(ctx context.Context, in *securityapi.CertificateRequest) (*securityapi.CertificateResponse, error) {
	markDecided(ctx)

	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()

	c := callerOf(ctx)
	r := &request{s: s, ctx: ctx, source: c.addr, rec: s.newAuditRecord(c)}

	resp, err := r.run(in.GetCsr())
	if err == nil {
		s.decisions.count(nil, r.rec.tokenKind)
		r.knowCaller()

		return resp, nil
	}

	if countsAsFailure(err) {
		s.limiter.fail(r.source)
	}

	st := toStatus(err, r.rec.requestID)
	s.auditRefused(ctx, &r.rec, err, status.Code(st))

	return resp, st
}

// run applies the checks in their fixed order (token, time, CSR, names),
// spends a use of the token only when all passed, binds the names, and
// signs.
func (r *request) run(unsafeCSR []byte) (*securityapi.CertificateResponse, error) {
	for _, step := range []func() error{
		r.authenticate,
		r.checkTime,
		func() error { return r.checkCSR(unsafeCSR) },
		r.checkNames,
		r.consume,
		r.bindNames,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}

	return r.sign()
}

func (r *request) authenticate() error {
	tok, err := tokenFromContext(r.ctx)
	if err != nil {
		return err
	}

	// The id is public; recording it before the check shows which id a
	// guesser aimed at.
	r.rec.tokenID = tok.ID()

	g, err := r.s.cfg.Authenticator.Authenticate(r.ctx, tok)
	if err != nil {
		if errors.Is(err, ErrInvalidToken) {
			return err
		}

		return fmt.Errorf("trustd: authenticating: %w", err)
	}

	r.grant = g
	r.rec.tokenKind = tokenKind(g)

	return nil
}

func (r *request) checkTime() error {
	if !r.s.cfg.TimeGate.Synced() {
		return ErrTimeNotSynced
	}

	return nil
}

func (r *request) checkCSR(unsafe []byte) error {
	csr, err := ca.ParseCSR(unsafe)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}

	r.rec.commonName = csr.Request.Subject.CommonName
	r.rec.sans = csr.Hosts()

	if name, ok := r.s.reserved().Find(csr.Request.Subject.CommonName, csr.Request.DNSNames, csr.Request.IPAddresses); ok {
		return fmt.Errorf("%w: %s", ErrReservedName, name)
	}

	policy, err := r.callerPolicy(csr)
	if err == nil {
		err = checkPolicy(policy, csr)
	}

	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}

	r.csr = csr

	return nil
}

// checkPolicy applies the caller's policy (its source address and the
// token's allowed SANs) to every name of the request, the common name
// included: some verifiers still read it.
func checkPolicy(p *sanpolicy.Policy, csr *ca.CSR) error {
	if p.Unrestricted() {
		return nil
	}

	req := csr.Request
	if err := p.Check(req.DNSNames, req.IPAddresses); err != nil {
		return err
	}

	cn := req.Subject.CommonName
	if cn == "" {
		return nil
	}

	if addr, err := netip.ParseAddr(cn); err == nil {
		if !p.PermitsIP(addr) {
			return fmt.Errorf("%w: common name %s", sanpolicy.ErrNotPermitted, cn)
		}

		return nil
	}

	if !p.PermitsDNS(cn) {
		return fmt.Errorf("%w: common name %q", sanpolicy.ErrNotPermitted, cn)
	}

	return nil
}

func (r *request) consume() error {
	if err := r.s.cfg.Authenticator.Consume(r.ctx, r.grant); err != nil {
		if errors.Is(err, ErrInvalidToken) {
			return err
		}

		return fmt.Errorf("trustd: counting the token's use: %w", err)
	}

	return nil
}

// sign issues the certificate under the server profile: the profile alone
// decides its usages, Organization (none) and CA flag. The issuance record
// is on disk before the certificate leaves; a certificate whose record
// cannot be written is withheld, and the call fails.
func (r *request) sign() (*securityapi.CertificateResponse, error) {
	cas := r.s.cfg.CAs.AcceptedCAs()
	if cas == nil {
		return nil, errors.New("trustd: no accepted CAs")
	}

	var recording chan error

	issued, err := r.s.cfg.Signer.Issue(ca.Request{
		CSR: r.csr, Profile: ca.ProfileServer, TTL: r.s.cfg.CertTTL,
		// The record is written, and synced, while the certificate is
		// signed: the sync's latency overlaps the signature's.
		Signing: func(serial *big.Int, notAfter time.Time) {
			r.rec.serial, r.rec.notAfter = serial.Text(16), notAfter
			recording = r.recordInBackground()
		},
	})

	switch {
	case recording != nil:
		// Waited for even when signing failed: the call's refusal then
		// follows the record, under the same request id.
		if rerr := <-recording; err == nil {
			err = rerr
		}
	case err == nil:
		// A signer that does not announce its signature is recorded
		// after it.
		r.rec.serial, r.rec.notAfter = issued.Cert.SerialNumber.Text(16), issued.Cert.NotAfter
		err = r.s.recordIssued(r.ctx, &r.rec)
	}

	if err != nil {
		return nil, r.signingError(err)
	}

	if issued.Cert.SerialNumber.Text(16) != r.rec.serial || !issued.Cert.NotAfter.Equal(r.rec.notAfter) {
		return nil, errors.New("trustd: the certificate signed is not the one recorded")
	}

	return &securityapi.CertificateResponse{Ca: cas.PEM(), Crt: issued.PEM}, nil
}

// recordInBackground writes the issuance record of the request as it now
// stands, and sends the result.
func (r *request) recordInBackground() chan error {
	done := make(chan error, 1)
	rec := r.rec

	go func() { done <- r.s.recordIssued(r.ctx, &rec) }()

	return done
}

// signingError is the error of a failed issuance: the record's own, or
// the signer's.
func (r *request) signingError(err error) error {
	if errors.Is(err, errRecording) {
		return err
	}

	return fmt.Errorf("trustd: signing: %w", err)
}

// knowCaller tells the listener's connection table that the caller's
// address is a node's, when the certificate just signed names it: the
// node's next connections, which present that certificate, then do their
// handshake apart from strangers (connlimit's known sources), so that
// thousands of nodes that joined at once are not held off by each other's
// handshakes.
func (r *request) knowCaller() {
	if r.csr == nil || r.s.conns == nil || !slices.ContainsFunc(r.csr.Request.IPAddresses, func(ip net.IP) bool {
		a, ok := netip.AddrFromSlice(ip)

		return ok && a.Unmap() == r.source
	}) {
		return
	}

	r.s.Know(r.source)
}

// Know tells the listener's connection table that addr is a node's: its
// next connections do their handshake apart from strangers (connlimit's
// known sources). trustd knows the addresses it signed node certificates
// for, and those of the cluster's members (cmd/trustd follows the member
// list): each entry was recorded by a heartbeat whose node certificate
// named it, so a worker that moves to this control plane when its own
// fails is not evicted here as a stranger. The address picks the queue and
// authorizes nothing: the handshake must still prove a node certificate.
func (s *Server) Know(addr netip.Addr) {
	if s.conns == nil || !addr.IsValid() {
		return
	}

	s.conns.Know(net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr.Unmap(), 0)))
}
