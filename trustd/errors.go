package trustd

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusals of the server. Each maps to one gRPC code at the API boundary
// (toStatus); anything else is an internal error whose cause stays in the
// audit record.
var (
	// ErrInvalidToken: the token is missing, malformed, unknown, wrong,
	// expired, revoked or used up. Callers see one message for all of them.
	ErrInvalidToken = errors.New("trustd: invalid token")
	// ErrTimeNotSynced: the time gate is closed.
	ErrTimeNotSynced = errors.New("trustd: time not synced")
	// ErrBadRequest: the CSR breaks a rule; the error names the rule.
	ErrBadRequest = errors.New("trustd: bad certificate request")
	// ErrReservedName: the CSR names a control plane's address or name,
	// which no token may obtain; the error names it.
	ErrReservedName = errors.New("trustd: a token never obtains a certificate for a control plane's address or name")
	// ErrNameHeld: the CSR names a name bound to another node's live
	// certificate; the error names the holder and until when.
	ErrNameHeld = errors.New("trustd: the name is held by another node")
	// ErrNamesUnavailable: the cluster's record of names (etcd) cannot
	// answer, so no certificate naming a name is issued until it does.
	ErrNamesUnavailable = errors.New("trustd: the cluster's record of node names is unavailable (etcd unreachable or without quorum); " +
		"certificates naming a name are refused until it recovers")
	// ErrStoreUnavailable: the cluster's token store (etcd) cannot answer,
	// so stored tokens are refused; the machine config's token still works.
	ErrStoreUnavailable = errors.New("trustd: the cluster's token store is unavailable (etcd unreachable or without quorum); " +
		"stored tokens are refused until it recovers")
	// ErrRateLimited: the source made too many failed requests.
	ErrRateLimited = errors.New("trustd: too many failed requests from this address")
)

// toStatus maps a refusal to the status the caller sees. Only the CSR
// rule is passed on in detail: token refusals all read the same, so a
// caller learns nothing about which ids exist, and internal causes never
// leave the node (the reference lets an operator find the audit record).
func toStatus(err error, ref string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInvalidToken):
		return status.Error(codes.Unauthenticated, ErrInvalidToken.Error())
	case errors.Is(err, ErrTimeNotSynced):
		return status.Error(codes.FailedPrecondition, ErrTimeNotSynced.Error())
	case errors.Is(err, ErrBadRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrReservedName), errors.Is(err, ErrNameHeld):
		// The name is not the caller's to have: the error says whose it is.
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrNamesUnavailable):
		return status.Error(codes.Unavailable, ErrNamesUnavailable.Error())
	case errors.Is(err, ErrStoreUnavailable):
		return status.Error(codes.Unavailable, ErrStoreUnavailable.Error())
	case errors.Is(err, ErrRateLimited):
		return status.Error(codes.ResourceExhausted, ErrRateLimited.Error())
	case errors.Is(err, errNotANode):
		// The revocation list is the nodes' business: a caller without a
		// node certificate is not who it must be.
		return status.Error(codes.Unauthenticated, errNotANode.Error())
	case errors.Is(err, errStopping):
		return status.Error(codes.Unavailable, errStopping.Error())
	case errors.Is(err, errTooManyWatchers):
		return status.Error(codes.ResourceExhausted, errTooManyWatchers.Error())
	case errors.Is(err, errStreaming):
		return status.Error(codes.Unimplemented, errStreaming.Error())
	default:
		return status.Error(codes.Internal, fmt.Sprintf("trustd: internal error (ref %s)", ref))
	}
}

// countsAsFailure reports whether a refusal is the caller's fault and so
// counts against its rate limit. A closed time gate is the node's state,
// not the caller's; internal errors are ours. A name held by another node
// is not counted either: a node replaced at a new address retries with a
// valid token until the old certificate ends, and its refusals must keep
// naming the holder rather than turn into ResourceExhausted.
func countsAsFailure(err error) bool {
	return errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrBadRequest) || errors.Is(err, ErrReservedName)
}
