package apid

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
)

// toStatus maps apid's errors to gRPC statuses, once, at the API boundary.
// A status that came from a backend or from gRPC is passed on as it is.
func (s *Server) toStatus(method string, err error) error {
	if err == nil {
		return nil
	}

	switch {
	case errors.Is(err, ErrBadRouting), errors.Is(err, errNoFanOut):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNoForwarding):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, errPoolFull), errors.Is(err, errCallerPoolFull), errors.Is(err, errReplyTooLarge), errors.Is(err, errTooManyStreams):
		return status.Error(codes.ResourceExhausted, err.Error())
	case isCredentialEnded(err), errors.Is(err, errNoChain):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, errPoolClosed):
		return status.Error(codes.Unavailable, err.Error())
	}

	if ue := (*nodeUnreachableError)(nil); errors.As(err, &ue) {
		return status.Error(ue.code(), ue.Error())
	}

	if st, ok := status.FromError(err); ok {
		return st.Err()
	}

	return s.internal(s.log.Error, "call failed", slog.String(logkey.Method, method), slog.String(logkey.Error, err.Error()))
}

// internal writes the one log line of an internal error, with its cause
// in attrs and a random reference, and returns the Internal status the
// caller sees: the reference, never the cause.
func (s *Server) internal(log func(msg string, args ...any), msg string, attrs ...slog.Attr) error {
	ref := s.newRef()

	args := make([]any, 0, len(attrs)+1)
	for _, a := range attrs {
		args = append(args, a)
	}

	log(msg, append(args, slog.String(logkey.RequestID, ref))...)

	return status.Error(codes.Internal, fmt.Sprintf("apid: internal error (ref %s)", ref))
}

// newRef returns the random reference of an internal error. A Server not
// built by New (a test's) has no Rand: crypto/rand then.
func (s *Server) newRef() string {
	r := s.rand
	if r == nil {
		r = rand.Reader
	}

	b := make([]byte, 10)
	if _, err := io.ReadFull(r, b); err != nil {
		return "unknown"
	}

	return hex.EncodeToString(b)
}
