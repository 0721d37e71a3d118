// Package certapi implements Aegis's CertificateService (api/certificates)
// for a node run by machined: a caller authenticated by a valid client
// certificate trades a request for a new key against a client certificate
// with the same roles. Only control planes hold the CA key; elsewhere the
// service answers FailedPrecondition.
package certapi

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
)

// Log field names of the package.
const (
	LogRoles      = "roles"
	LogCommonName = "common_name"
	LogSerial     = "serial"
	LogNotAfter   = "not_after"
	LogTTL        = "ttl"
	LogReason     = "reason"
	LogCode       = "code"
)

// Audit record messages.
const (
	msgRenewed = "client certificate renewed"
	msgRefused = "client certificate renewal refused"
)

// ErrNoCA is what an Authority returns on a node without the CA key.
var ErrNoCA = errors.New("certapi: this node does not hold the CA key")

// Authority is where a node issues client certificates from.
type Authority interface {
	// ClientIssuer returns an issuer of client certificates and the PEM
	// bundle of the CAs the node accepts, or ErrNoCA.
	ClientIssuer() (*ca.Issuer, []byte, error)
}

// Config configures a Server. Authority is required.
type Config struct {
	Authority Authority
	// MaxTTL bounds the lifetime of a renewed certificate. Zero means
	// DefaultMaxTTL; more than DefaultMaxTTL is cut down to it.
	MaxTTL time.Duration
	// Logger receives one audit record per decision. Nil discards.
	Logger *slog.Logger
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

	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	return &Server{cfg: cfg}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { certificates.RegisterCertificateServiceServer(g, s) }

// Renew issues a client certificate for the request's key with the
// caller's roles, which the authorization layer put in ctx. The lifetime is
// the one asked for, capped by the configured maximum; no lifetime asked
// means the maximum.
func (s *Server) Renew(ctx context.Context, req *certificates.RenewRequest) (*certificates.RenewResponse, error) {
	roles, _ := authz.RolesFromContext(ctx)
	rec := []any{slog.String(LogRoles, roles.String())}

	issued, caPEM, err := s.renew(ctx, req)
	if err != nil {
		// A status is the caller's to read; anything else is a failure of
		// the node, recorded with its cause and answered without it.
		st, ok := status.FromError(err)
		reason := st.Message()

		if !ok {
			st, reason = status.New(codes.Internal, "internal error"), err.Error()
		}

		s.cfg.Logger.Warn(msgRefused, append(rec, slog.String(LogCode, st.Code().String()), slog.String(LogReason, reason))...)

		return nil, st.Err()
	}

	s.cfg.Logger.Info(msgRenewed, append(rec,
		slog.String(LogCommonName, issued.Cert.Subject.CommonName),
		slog.String(LogSerial, issued.Cert.SerialNumber.Text(16)),
		slog.Duration(LogTTL, issued.Cert.NotAfter.Sub(issued.Cert.NotBefore)),
		slog.Time(LogNotAfter, issued.Cert.NotAfter))...)

	return &certificates.RenewResponse{Messages: []*certificates.Renewed{{Crt: issued.PEM, Ca: caPEM}}}, nil
}

// renew makes the decision. A refusal is a status; any other error is the
// node's own failure.
func (s *Server) renew(ctx context.Context, req *certificates.RenewRequest) (*ca.Issued, []byte, error) {
	roles, ok := authz.RolesFromContext(ctx)
	if !ok || len(roles) == 0 {
		return nil, nil, status.Error(codes.PermissionDenied, "renewal needs a caller with roles")
	}

	ttl, err := s.ttl(req)
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}

	csr, err := ca.ParseCSR(req.GetCsr())
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}

	if hosts := csr.Hosts(); len(hosts) > 0 {
		return nil, nil, status.Errorf(codes.InvalidArgument,
			"a client certificate names no hosts; the request names %s", strings.Join(hosts, ", "))
	}

	iss, caPEM, err := s.cfg.Authority.ClientIssuer()
	if errors.Is(err, ErrNoCA) {
		return nil, nil, status.Error(codes.FailedPrecondition,
			"client certificates are renewed by control-plane nodes, which hold the CA key; this node does not: use a control-plane endpoint")
	}

	if err != nil {
		return nil, nil, err
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: roles, TTL: ttl})
	if err != nil {
		var refusal *ca.Error
		if errors.As(err, &refusal) {
			return nil, nil, status.Error(codes.InvalidArgument, refusal.Error())
		}

		return nil, nil, err
	}

	return issued, caPEM, nil
}

// ttl is the lifetime to issue: what was asked, capped by the maximum.
func (s *Server) ttl(req *certificates.RenewRequest) (time.Duration, error) {
	ttl, err := CheckTTL("ttl", req.GetTtl())
	if err != nil || ttl == 0 {
		return s.cfg.MaxTTL, err
	}

	return min(ttl, s.cfg.MaxTTL), nil
}
