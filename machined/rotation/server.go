package rotation

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// Audit record messages.
const (
	msgRecorded  = "CA rotation state recorded"
	msgReissued  = "node certificates re-issued on request"
	msgNoReissue = "node certificates not re-issued"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Store returns the cluster's store, or ErrNoEtcd. Required.
	Store func() (*Store, error)
	// Reissue re-issues the node's certificates now and returns them by
	// kind. Required.
	Reissue func(ctx context.Context) (map[string]*x509.Certificate, error)
	// Clock dates the records. Nil means the system clock.
	Clock clock.Clock
	// Logger receives an audit record per change. Nil discards.
	Logger *slog.Logger
	// Rand makes the references of internal errors. Nil means crypto/rand.
	Rand io.Reader
}

// Server implements rotation.RotationServiceServer for machined.
type Server struct {
	rotation.UnimplementedRotationServiceServer

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
func (s *Server) Register(g *grpc.Server) { rotation.RegisterRotationServiceServer(g, s) }

// Get answers the recorded rotation of a kind.
func (s *Server) Get(ctx context.Context, req *rotation.GetRequest) (*rotation.GetResponse, error) {
	if !slices.Contains(rotationstate.Kinds(), req.GetCa()) {
		return nil, s.toStatus(badKind(req.GetCa()))
	}

	store, err := s.cfg.Store()
	if err != nil {
		return nil, s.toStatus(err)
	}

	r, rev, err := store.Get(ctx, req.GetCa())
	if err != nil {
		return nil, s.toStatus(err)
	}

	return &rotation.GetResponse{Messages: []*rotation.RotationState{{Rotation: r, Revision: rev}}}, nil
}

// Put records a rotation's state by compare-and-swap. Who started it and
// when are the server's to say: taken from the caller's certificate and
// the clock when the record is created, kept from the stored record after.
func (s *Server) Put(ctx context.Context, req *rotation.PutRequest) (*rotation.PutResponse, error) {
	now := s.cfg.Clock.Now()

	r, ok := proto.Clone(req.GetRotation()).(*rotation.Rotation)
	if !ok || r == nil {
		return nil, s.toStatus(Check(nil, now))
	}

	if err := Check(r, now); err != nil {
		return nil, s.toStatus(err)
	}

	store, err := s.cfg.Store()
	if err != nil {
		return nil, s.toStatus(err)
	}

	if err = s.fillOrigin(ctx, store, r, req.GetExpectedRevision()); err != nil {
		return nil, s.toStatus(err)
	}

	r.UpdatedAt = timestamppb.New(now)

	rev, err := store.Put(ctx, r, req.GetExpectedRevision())
	if err != nil {
		return nil, s.toStatus(err)
	}

	s.cfg.Logger.Info(msgRecorded, slog.String(logkey.Kind, r.GetCa()), slog.Int(logkey.Step, int(r.GetStep())),
		slog.String(logkey.Subject, r.GetStartedBy()), slog.String(logkey.CA, fingerprint(r.GetNewCa())))

	return &rotation.PutResponse{Messages: []*rotation.RotationState{{Rotation: r, Revision: rev}}}, nil
}

// fillOrigin sets who started the rotation and when: a new record (or one
// that replaces an ended rotation) from the caller and the clock, else
// from the stored record.
func (s *Server) fillOrigin(ctx context.Context, store *Store, r *rotation.Rotation, expected int64) error {
	stored, rev, err := store.Get(ctx, r.GetCa())
	if err != nil {
		return err
	}

	if rev != expected {
		return ErrConflict
	}

	if rotationstate.InProgress(stored) {
		r.StartedBy, r.StartedAt = stored.GetStartedBy(), stored.GetStartedAt()

		return nil
	}

	r.StartedBy, r.StartedAt = "", timestamppb.New(s.cfg.Clock.Now())
	if caller, err := authz.CertificateFromMetadata(ctx); err == nil {
		r.StartedBy = caller.Subject.String()
	}

	return nil
}

// Reissue re-issues the node's certificates from the CA in effect.
func (s *Server) Reissue(ctx context.Context, _ *rotation.ReissueRequest) (*rotation.ReissueResponse, error) {
	issued, err := s.cfg.Reissue(ctx)
	if err != nil {
		s.cfg.Logger.Warn(msgNoReissue, slog.String(logkey.Error, err.Error()))

		return nil, s.toStatus(reissueError{err})
	}

	out := &rotation.Reissued{}

	for _, kind := range slices.Sorted(maps.Keys(issued)) {
		c := issued[kind]
		out.Certificates = append(out.Certificates, &rotation.Issued{Kind: kind, Crt: ca.EncodeCertificate(c)})
		s.cfg.Logger.Info(msgReissued, slog.String(logkey.Kind, kind), slog.String(logkey.Subject, c.Subject.String()),
			slog.String(logkey.CA, c.Issuer.String()), slog.Time(logkey.NotAfter, c.NotAfter))
	}

	return &rotation.ReissueResponse{Messages: []*rotation.Reissued{out}}, nil
}

// badKind is a request naming a CA kind that is not one of
// rotationstate.Kinds.
type badKind string

func (k badKind) Error() string {
	return fmt.Sprintf("rotation: ca: %q is not one of %v", string(k), rotationstate.Kinds())
}

// reissueError is a failed re-issue, already logged: the node could not
// reach what issues its certificates now, and the caller may retry.
type reissueError struct{ error }

// toStatus maps the package's errors to the codes callers see; anything
// else is answered Internal with a reference to the log line of its cause.
func (s *Server) toStatus(err error) error {
	var (
		kind    badKind
		reissue reissueError
	)

	switch {
	case errors.As(err, &reissue):
		return status.Error(codes.Unavailable, reissue.Error())
	case errors.As(err, &kind):
		return status.Error(codes.InvalidArgument, kind.Error())
	case errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, "machined: the rotation state in etcd is unavailable (no quorum?); nothing recorded")
	case errors.Is(err, ErrNoEtcd):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, ErrBadRecord):
		return status.Error(codes.InvalidArgument, err.Error())
	}

	ref := requestid.New(s.cfg.Rand)
	s.cfg.Logger.Error("rotation state failed", slog.String(logkey.RequestID, ref), slog.String(logkey.Error, err.Error()))

	return status.Error(codes.Internal, "machined: internal error (ref "+ref+")")
}

func fingerprint(pemBytes []byte) string {
	c, err := ca.ParseCertificate(pemBytes)
	if err != nil {
		return ""
	}

	return ca.Fingerprint(c)
}
