package certapi

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/requestid"
	"github.com/aegis-os/aegis/machined/revocation"
)

// errNoCertificate: apid passed no client certificate on with the call.
var errNoCertificate = errors.New("renewal needs the caller's client certificate, and none was passed on")

// denied is a renewal the presented certificate may not have (revoked,
// no roles, an impersonator's); its message is the caller's to read.
type denied struct{ error }

// invalid is a request the caller must fix (its CSR, its lifetime); its
// message is the caller's to read.
type invalid struct{ error }

// toStatus maps a failed renewal to the status its caller sees, once, at
// the boundary, with ref empty; or, for a failure of the node, to Internal
// with a fresh reference (ref), which the audit record of the refusal
// carries beside the cause:
//   - PermissionDenied: the certificate presented cannot renew (none passed
//     on, revoked or renewed from a revoked one, no roles, a node's own);
//   - InvalidArgument: the request breaks a rule (CSR, lifetime, issuing
//     policy), said in full;
//   - FailedPrecondition: the node cannot issue now or here (no CA key on a
//     worker, clock not synced), which another endpoint or time fixes;
//   - ResourceExhausted: the certificate's family of renewals is full;
//   - Unavailable: the lineage could not be recorded (etcd without quorum),
//     so the renewal is refused and may be retried.
func (s *Server) toStatus(err error) (st *status.Status, ref string) {
	var (
		d       denied
		bad     invalid
		refusal *ca.Error
	)

	switch {
	case errors.Is(err, errNoCertificate):
		return status.New(codes.PermissionDenied, errNoCertificate.Error()), ""
	case errors.As(err, &d):
		return status.New(codes.PermissionDenied, d.Error()), ""
	case errors.As(err, &bad):
		return status.New(codes.InvalidArgument, bad.Error()), ""
	case errors.As(err, &refusal):
		return status.New(codes.InvalidArgument, refusal.Error()), ""
	case errors.Is(err, ErrNoCA):
		return status.New(codes.FailedPrecondition,
			"client certificates are renewed by control-plane nodes, which hold the CA key; this node does not: use a control-plane endpoint"), ""
	case errors.Is(err, ErrTimeNotSynced):
		return status.New(codes.FailedPrecondition, ErrTimeNotSynced.Error()), ""
	case errors.Is(err, revocation.ErrLineageFull):
		return status.New(codes.ResourceExhausted, err.Error()), ""
	case errors.Is(err, revocation.ErrUnavailable), errors.Is(err, revocation.ErrNoEtcd):
		return status.New(codes.Unavailable,
			"renewal refused: it is recorded in the cluster state in etcd first, which is unavailable (no quorum?); try again"), ""
	}

	ref = requestid.New(s.cfg.Rand)

	return status.New(codes.Internal, "machined: internal error (ref "+ref+")"), ref
}
