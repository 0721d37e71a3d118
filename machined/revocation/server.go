package revocation

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// ErrNoEtcd is what a ServerConfig.Store returns on a node without the
// cluster's etcd (a worker, or a control plane before its etcd runs).
var ErrNoEtcd = errors.New("revocation: revocations are recorded in etcd, which runs on control-plane nodes; use a control-plane endpoint")

// Audit record message.
const msgRevoked = "client certificate revoked"

// ServerConfig configures a Server.
type ServerConfig struct {
	// Store returns the cluster's store, or ErrNoEtcd. Required.
	Store func() (*Store, error)
	// Local is the node's copy, listed where there is no etcd. Required.
	Local *List
	// Clock dates the revocations. Nil means the system clock.
	Clock clock.Clock
	// Logger receives one audit record per revocation. Nil discards.
	Logger *slog.Logger
	// Rand makes the references of internal errors. Nil means crypto/rand.
	Rand io.Reader
}

// Server implements revocations.RevocationServiceServer for machined.
type Server struct {
	revocations.UnimplementedRevocationServiceServer

	cfg ServerConfig
}

// NewServer returns a Server.
func NewServer(cfg ServerConfig) *Server {
	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Rand = defaults.Rand(cfg.Rand)

	return &Server{cfg: cfg}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { revocations.RegisterRevocationServiceServer(g, s) }

// Revoke records the request's serial in etcd, with every live
// certificate renewed from it. The caller's certificate, which apid passes
// on, names who revoked it.
func (s *Server) Revoke(ctx context.Context, req *revocations.RevokeRequest) (*revocations.RevokeResponse, error) {
	serial, err := ParseSerial(req.GetSerial())
	if err != nil {
		return nil, s.toStatus(err)
	}

	now := s.cfg.Clock.Now()
	e := Entry{Serial: serial, RevokedAt: now.UTC().Truncate(time.Second), Reason: req.GetReason()}

	if req.GetNotAfter() != nil {
		e.NotAfter = req.GetNotAfter().AsTime()
	} else {
		e.NotAfter = now.Add(ca.DefaultsFor(ca.ProfileClient).MaxTTL)
	}

	if caller, err := authz.CertificateFromMetadata(ctx); err == nil {
		e.RevokedBy = caller.Subject.String()
	}

	store, err := s.cfg.Store()
	if err != nil {
		return nil, s.toStatus(err)
	}

	rev, err := store.Revoke(ctx, e)
	if err != nil {
		return nil, s.toStatus(err)
	}

	if !rev.Existed && !rev.Expired(now) {
		s.audit(rev.Entry, "")
	}

	out := &revocations.Revoked{Revocation: ToProto(rev.Entry)}
	for _, d := range rev.Descendants {
		if !d.Existed {
			s.audit(d.Entry, rev.Serial)
		}

		out.Descendants = append(out.Descendants, ToProto(d.Entry))
	}

	return &revocations.RevokeResponse{Messages: []*revocations.Revoked{out}}, nil
}

// audit records the revocation of e; renewedFrom names the revoked
// certificate it was renewed from, when the revocation covers it as such.
func (s *Server) audit(e Entry, renewedFrom string) {
	attrs := []any{
		slog.String(logkey.Serial, e.Serial), slog.Time(logkey.NotAfter, e.NotAfter),
		slog.String(logkey.Subject, e.RevokedBy), slog.String(logkey.Reason, e.Reason),
	}
	if renewedFrom != "" {
		attrs = append(attrs, slog.String(logkey.RenewedFrom, renewedFrom))
	}

	s.cfg.Logger.Info(msgRevoked, attrs...)
}

// List answers the cluster's list from etcd on a control plane, and the
// node's own copy elsewhere.
func (s *Server) List(ctx context.Context, _ *revocations.ListRequest) (*revocations.ListResponse, error) {
	var entries []Entry

	store, err := s.cfg.Store()

	switch {
	case errors.Is(err, ErrNoEtcd):
		entries = s.cfg.Local.Entries()
	case err != nil:
		return nil, s.toStatus(err)
	default:
		if entries, err = store.List(ctx); err != nil {
			return nil, s.toStatus(err)
		}
	}

	list := &revocations.RevocationList{}
	for _, e := range entries {
		list.Revocations = append(list.Revocations, ToProto(e))
	}

	return &revocations.ListResponse{Messages: []*revocations.RevocationList{list}}, nil
}

// toStatus maps the package's errors to the codes callers see; anything
// else is answered Internal with a reference to the log line of its cause.
func (s *Server) toStatus(err error) error {
	switch {
	case errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, "machined: revocation not recorded: the cluster state in etcd is unavailable (no quorum?); apid keeps enforcing the list it has")
	case errors.Is(err, ErrNoEtcd):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrFull):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrBadEntry):
		return status.Error(codes.InvalidArgument, err.Error())
	}

	ref := requestid.New(s.cfg.Rand)
	s.cfg.Logger.Error("revocation failed", slog.String(logkey.RequestID, ref), slog.String(logkey.Error, err.Error()))

	return status.Error(codes.Internal, "machined: internal error (ref "+ref+")")
}

// ToProto is the wire form of e.
func ToProto(e Entry) *revocations.Revocation {
	r := &revocations.Revocation{
		Serial: e.Serial, NotAfter: timestamppb.New(e.NotAfter), RevokedBy: e.RevokedBy, Reason: e.Reason,
	}
	if !e.RevokedAt.IsZero() {
		r.RevokedAt = timestamppb.New(e.RevokedAt)
	}

	return r
}

// FromProto reads the serial and expiry of a wire entry, checked.
func FromProto(r *revocations.Revocation) (Entry, error) {
	e := Entry{Serial: r.GetSerial(), NotAfter: r.GetNotAfter().AsTime()}
	if r.GetNotAfter() == nil {
		e.NotAfter = time.Time{}
	}

	if r.GetRevokedAt() != nil {
		e.RevokedAt = r.GetRevokedAt().AsTime()
	}

	e.RevokedBy, e.Reason = r.GetRevokedBy(), r.GetReason()

	return e, e.check()
}
