// Package certapi implements Aegis's CertificateService (api/certificates)
// for a node run by machined: a caller authenticated by a valid client
// certificate trades a request for a new key against a client certificate
// with the same roles and common name and at most the same lifetime as the
// certificate it presented, which apid verified and passes on
// (authz.CertificateFromMetadata). Only control planes hold the CA key;
// elsewhere the service answers FailedPrecondition. Every renewal is
// recorded in the cluster's etcd before the new certificate is returned
// (Config.Lineage), so that revoking a certificate revokes what was renewed
// from it.
package certapi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/serial"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/revocation"
)

// Audit record messages.
const (
	msgRenewed = "client certificate renewed"
	msgRefused = "client certificate renewal refused"
)

// ErrNoCA is what an Authority returns on a node without the CA key.
var ErrNoCA = errors.New("certapi: this node does not hold the CA key")

// ErrTimeNotSynced is what an Authority returns while the node's clock is
// not synced: a certificate dated by an untrusted clock could be valid
// when it should not be. Its text is the message callers read.
var ErrTimeNotSynced = errors.New("time not synced: this node issues certificates only once its clock is synced with its NTP servers")

// Authority is where a node issues client certificates from.
type Authority interface {
	// ClientIssuer returns an issuer of client certificates and the PEM
	// bundle of the CAs the node accepts, or ErrNoCA, or ErrTimeNotSynced.
	ClientIssuer() (*ca.Issuer, []byte, error)
}

// Lineage is where renewals are recorded: the cluster's revocation store
// in etcd (revocation.Store.Record).
type Lineage interface {
	// Record keeps, durably, that l.Child was renewed from l.Parent. It
	// fails with revocation.ErrRevoked when the parent is revoked,
	// revocation.ErrLineageFull when its family is at its bound, and
	// revocation.ErrUnavailable when etcd does not answer.
	Record(ctx context.Context, l revocation.Link) error
}

// Config configures a Server. Authority is required.
type Config struct {
	Authority Authority
	// MaxTTL bounds the lifetime of a renewed certificate. Zero means
	// DefaultMaxTTL; more than DefaultMaxTTL is cut down to it.
	MaxTTL time.Duration
	// Revoked reports whether the cluster's revocation list holds a serial
	// (lowercase hexadecimal): a revoked certificate is never renewed. Nil
	// revokes nothing.
	Revoked func(serial string) bool
	// Lineage records every renewal before its certificate is returned, so
	// that revoking a certificate revokes what was renewed from it; it
	// refuses the renewal of a revoked certificate. Nil records nothing
	// (tests of other parts: a node always sets it).
	Lineage Lineage
	// Logger receives one audit record per decision. Nil discards.
	Logger *slog.Logger
	// Rand makes the references of internal errors. Nil means crypto/rand.
	Rand io.Reader
	// Counted counts each renewal: issued, refused (the caller's
	// request) or failed (the node's own failure). Nil counts nothing.
	Counted *metrics.ClientCertificateCounter
}

// Server implements certificates.CertificateServiceServer.
type Server struct {
	certificates.UnimplementedCertificateServiceServer

	cfg Config
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.MaxTTL <= 0 || cfg.MaxTTL > DefaultMaxTTL {
		cfg.MaxTTL = DefaultMaxTTL
	}

	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Rand = defaults.Rand(cfg.Rand)

	return &Server{cfg: cfg}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { certificates.RegisterCertificateServiceServer(g, s) }

// Renew issues a client certificate for the request's key that keeps what
// the presented certificate (the one apid verified and passed on) says:
// its roles, its common name and at most its lifetime. The roles apid put
// in ctx (talos-role) are not read: a renewal grants nothing the
// certificate did not already hold. An impersonator certificate, a node's
// own, cannot renew.
func (s *Server) Renew(ctx context.Context, req *certificates.RenewRequest) (*certificates.RenewResponse, error) {
	presented, perr := authz.CertificateFromMetadata(ctx)

	var rec []any
	if perr == nil {
		roles, _ := role.FromOrganization(presented.Subject.Organization)
		rec = []any{
			slog.String(logkey.AskingSerial, presented.SerialNumber.Text(16)),
			slog.String(logkey.AskingCommonName, presented.Subject.CommonName),
			slog.String(logkey.Roles, roles.String()),
		}
	}

	issued, caPEM, err := s.renew(ctx, req, presented, perr)
	if err != nil {
		// A refusal is the caller's to read; a failure of the node is
		// recorded with its cause and a reference, and answered with the
		// reference alone.
		st, ref := s.toStatus(err)
		reason := st.Message()

		outcome := metrics.OutcomeRefused
		if ref != "" {
			reason = err.Error()
			rec = append(rec, slog.String(logkey.RequestID, ref))
			outcome = metrics.OutcomeFailed
		}

		s.cfg.Counted.Count(metrics.OperationRenew, outcome)

		s.cfg.Logger.Warn(msgRefused, append(rec, slog.String(logkey.RefusalCode, st.Code().String()), slog.String(logkey.Reason, reason))...)

		return nil, st.Err()
	}

	s.cfg.Counted.Count(metrics.OperationRenew, metrics.OutcomeIssued)
	s.cfg.Logger.Info(msgRenewed, append(rec,
		slog.String(logkey.CommonName, issued.Cert.Subject.CommonName),
		slog.String(logkey.Serial, issued.Cert.SerialNumber.Text(16)),
		slog.Duration(logkey.TTL, issued.Cert.NotAfter.Sub(issued.Cert.NotBefore)),
		slog.Time(logkey.NotAfter, issued.Cert.NotAfter))...)

	return &certificates.RenewResponse{Messages: []*certificates.Renewed{{Crt: issued.PEM, Ca: caPEM}}}, nil
}

// renew makes the decision. Its errors are refusals toStatus knows (the
// package's, ca's and revocation's); any other is the node's own failure.
func (s *Server) renew(ctx context.Context, req *certificates.RenewRequest, presented *x509.Certificate, perr error) (*ca.Issued, []byte, error) {
	if perr != nil {
		return nil, nil, errNoCertificate
	}

	if s.cfg.Revoked != nil && s.cfg.Revoked(presented.SerialNumber.Text(16)) {
		return nil, nil, denied{fmt.Errorf(
			"the client certificate (serial %s) is revoked: a revoked certificate is not renewed", presented.SerialNumber.Text(16))}
	}

	roles, err := presentedRoles(presented)
	if err != nil {
		return nil, nil, denied{err}
	}

	ttl, err := s.ttl(req, presented)
	if err != nil {
		return nil, nil, invalid{err}
	}

	csr, err := checkCSR(req.GetCsr(), presented)
	if err != nil {
		return nil, nil, err
	}

	iss, caPEM, err := s.cfg.Authority.ClientIssuer()
	if err != nil {
		return nil, nil, err
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: roles, TTL: ttl})
	if err != nil {
		return nil, nil, err
	}

	if err := s.record(ctx, presented, issued.Cert); err != nil {
		return nil, nil, err
	}

	return issued, caPEM, nil
}

// record keeps the renewal's link before the certificate leaves the node:
// a certificate whose link is not kept would escape the revocation of its
// parent, so a failure refuses the renewal.
func (s *Server) record(ctx context.Context, parent, child *x509.Certificate) error {
	if s.cfg.Lineage == nil {
		return nil
	}

	l := revocation.Link{
		Parent: serial.Of(parent.SerialNumber), Child: serial.Of(child.SerialNumber), NotAfter: child.NotAfter,
	}

	err := s.cfg.Lineage.Record(ctx, l)
	if errors.Is(err, revocation.ErrRevoked) {
		return denied{fmt.Errorf(
			"the client certificate (serial %s) is revoked, or renewed from a revoked one: a revoked certificate is not renewed", l.Parent)}
	}

	return err // toStatus knows revocation's other errors
}
