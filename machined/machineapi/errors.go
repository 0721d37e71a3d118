package machineapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/certapi"
	"github.com/aegis-os/aegis/machined/containerd"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// Kinds of refusal. Each maps to one gRPC code at the API boundary
// (toStatus); the refusal's own text is what the caller reads. Errors of
// the packages below (system, etcd, ca, certapi, events) are mapped there
// too; anything else is internal: its cause is logged once with a
// reference, and the caller gets the reference alone.
var (
	// ErrBadRequest: the request breaks a rule; the error names it.
	ErrBadRequest = errors.New("machineapi: bad request")
	// ErrNotFound: the request names something the node does not have.
	ErrNotFound = errors.New("machineapi: not found")
	// ErrNotHere: the node cannot do this in its role or state.
	ErrNotHere = errors.New("machineapi: not possible on this node")
	// errNotServed: an Aegis node has no such thing to offer (Unimplemented).
	errNotServed = errors.New("machineapi: not served by Aegis nodes")
	// errUnreadable: a file Read does not serve to anyone, whatever the
	// caller's roles (PermissionDenied, as talosctl expects of a file it
	// may not read).
	errUnreadable = errors.New("machineapi: file not served")
)

// errWorker is the refusal of client configurations by a node without the
// CA key.
var errWorker = refuse(ErrNotHere, "client configurations are issued by control-plane nodes only")

// refused is an error of one of the kinds above whose text is the public
// message.
type refused struct {
	kind error
	msg  string
}

func (r *refused) Error() string { return r.msg }
func (r *refused) Unwrap() error { return r.kind }

// refuse returns a refusal of kind reading msg.
func refuse(kind error, msg string) error { return &refused{kind: kind, msg: msg} }

// Refuse returns a refusal of one of the kinds above (ErrBadRequest,
// ErrNotFound, ErrNotHere) whose text msg is what the caller reads: for
// the node's side of the API (Configurator).
func Refuse(kind error, msg string) error { return refuse(kind, msg) }

// refusef is refuse with a format.
func refusef(kind error, format string, args ...any) error {
	return refuse(kind, fmt.Sprintf(format, args...))
}

// toStatus maps an error to the status the caller sees, once, at the API
// boundary. A status that came from gRPC itself (a stream that broke) or
// from etcd's client is passed on as it is.
func (s *Server) toStatus(method string, err error) error {
	if err == nil {
		return nil
	}

	if code, msg, ok := refusal(err); ok {
		return status.Error(code, msg)
	}

	switch {
	case errors.Is(err, certapi.ErrNoCA):
		return status.Error(codes.FailedPrecondition, errWorker.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}

	if st, ok := status.FromError(err); ok {
		return st.Err()
	}

	ref := s.newID()
	s.cfg.Logger.Error("request failed", slog.String(logkey.Method, method), slog.String(logkey.RequestID, ref),
		slog.String(logkey.Error, err.Error()))

	return status.Error(codes.Internal, fmt.Sprintf("machined: internal error (ref %s)", ref))
}

// refusal returns the code and public message of a refusal: an error the
// caller may read. A CA's refusal is read without the context it was
// wrapped in on the way up.
func refusal(err error) (codes.Code, string, bool) {
	if caErr := (*ca.Error)(nil); errors.As(err, &caErr) {
		return codes.InvalidArgument, caErr.Error(), true
	}

	if vErr := (*certs.ValidationError)(nil); errors.As(err, &vErr) {
		return codes.InvalidArgument, vErr.Error(), true
	}

	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, etcd.ErrBadSnapshot), errors.Is(err, bundle.ErrInvalid),
		errors.Is(err, upgrade.ErrUpload):
		return codes.InvalidArgument, err.Error(), true
	case errors.Is(err, ErrNotFound), errors.Is(err, system.ErrUnknownService), errors.Is(err, etcd.ErrMemberNotFound),
		errors.Is(err, containerd.ErrNoContainer):
		return codes.NotFound, err.Error(), true
	case errors.Is(err, ErrNotHere), errors.Is(err, system.ErrNotAllowed), errors.Is(err, certapi.ErrTimeNotSynced),
		errors.Is(err, etcd.ErrNotControlPlane), errors.Is(err, etcd.ErrBootstrapped),
		errors.Is(err, etcd.ErrQuorum), errors.Is(err, etcd.ErrNoSnapshot), upgradeRefused(err):
		return codes.FailedPrecondition, err.Error(), true
	case errors.Is(err, etcd.ErrNotRunning):
		return codes.Unavailable, err.Error(), true
	case errors.Is(err, events.ErrLagged):
		return codes.DataLoss, err.Error(), true
	case errors.Is(err, errNotServed):
		return codes.Unimplemented, err.Error(), true
	case errors.Is(err, errUnreadable):
		return codes.PermissionDenied, err.Error(), true
	}

	return codes.OK, "", false
}

// upgradeRefused reports the refusals of an upgrade that depend on the
// node's or the cluster's state, not on the request: a version outside
// the skew, a trial under way, no version kept, etcd's quorum, another
// control plane's lease.
func upgradeRefused(err error) bool {
	for _, target := range []error{
		version.ErrSkew, version.ErrDowngrade, version.ErrNotSemver,
		upgrade.ErrOnTrial, upgrade.ErrNoPrevious, upgrade.ErrQuorum, upgrade.ErrLeaseHeld,
	} {
		if errors.Is(err, target) {
			return true
		}
	}

	return false
}

// newID returns a random ID: an actor ID tying events to the request that
// caused them, or the reference of an internal error.
func (s *Server) newID() string { return requestid.New(s.cfg.Rand) }
