package tokenapi

import (
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// errBadID: a Revoke named something that cannot be a token id.
var errBadID = errors.New("tokenapi: id is not of the token id form ([a-z0-9]{6})")

// requestError is what is wrong with a Create request; the caller reads
// its whole message.
type requestError struct{ err error }

func (e requestError) Error() string { return e.err.Error() }
func (e requestError) Unwrap() error { return e.err }

// toStatus maps the service's errors to the codes callers see, once, at
// the boundary. A bad request or id is the caller's to fix (InvalidArgument,
// in full); an unknown id is NotFound without echoing it; a full store is
// ResourceExhausted and an unreachable one Unavailable (no quorum: it
// passes, so the caller may retry). Anything else is Internal: the cause
// is logged once with a reference, and only the reference is sent.
func (s *Service) toStatus(err error) error {
	var bad requestError

	switch {
	case errors.Is(err, errBadID):
		return status.Error(codes.InvalidArgument, errBadID.Error())
	case errors.As(err, &bad):
		return status.Error(codes.InvalidArgument, bad.Error())
	case errors.Is(err, tokenstore.ErrNotFound):
		return status.Error(codes.NotFound, "tokenapi: no such token")
	case errors.Is(err, tokenstore.ErrFull):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, tokenstore.ErrUnavailable):
		s.cfg.Logger.Warn("token store unavailable", slog.String(logkey.Error, err.Error()))

		return status.Error(codes.Unavailable, tokenstore.ErrUnavailable.Error())
	}

	ref := requestid.New(s.cfg.Rand)
	s.cfg.Logger.Error("token store failed", slog.String(logkey.RequestID, ref), slog.String(logkey.Error, err.Error()))

	return status.Error(codes.Internal, "tokenapi: internal error (ref "+ref+")")
}
