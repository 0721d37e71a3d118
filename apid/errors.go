package apid

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// toStatus maps apid's errors to gRPC statuses, once, at the API boundary.
// A status that came from a backend or from gRPC is passed on as it is.
func (s *Server) toStatus(method string, err error) error {
	if err == nil {
		return nil
	}

	switch {
	case errors.Is(err, ErrBadRouting), errors.Is(err, errNoFanOut), errors.Is(err, errUnreadableSecrets):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNoForwarding):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, errPoolFull), errors.Is(err, errCallerPoolFull), errors.Is(err, errReplyTooLarge), errors.Is(err, errTooManyStreams):
		return status.Error(codes.ResourceExhausted, err.Error())
	case isCredentialEnded(err), errors.Is(err, errNoChain):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, errPoolClosed), errors.Is(err, errStopping):
		return status.Error(codes.Unavailable, err.Error())
	}

	// Secrets for another role: the call could run once the node (or the
	// config) is the right one.
	if we := (*wrongRoleError)(nil); errors.As(err, &we) {
		return status.Error(codes.FailedPrecondition, we.Error())
	}

	// A node apid does not know now may be one that is rejoining: the
	// caller may retry, as for a node that is down.
	if errors.As(err, new(*notMemberError)) {
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

// random is the Server's source of randomness. A Server not built by New
// (a test's) has no Rand: crypto/rand then.
func (s *Server) random() io.Reader { return defaults.Rand(s.rand) }

// internal writes the one log line of an internal error, with its cause
// in attrs and a random reference, and returns the Internal status the
// caller sees: the reference, never the cause.
func (s *Server) internal(log func(msg string, args ...any), msg string, attrs ...slog.Attr) error {
	ref := requestid.New(s.random())

	args := make([]any, 0, len(attrs)+1)
	for _, a := range attrs {
		args = append(args, a)
	}

	log(msg, append(args, slog.String(logkey.RequestID, ref))...)

	return status.Error(codes.Internal, fmt.Sprintf("apid: internal error (ref %s)", ref))
}
