package statictoken

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// Timings of the rotation, where Options leave them zero.
const (
	// MinOverlap is the shortest overlap a rotation should be given: the
	// workers' configs are updated within it, one call each, and a shorter
	// one could end before the last worker has the new token.
	MinOverlap = time.Minute

	// DefaultTrustdWait bounds the wait for a control plane's trustd to
	// follow its applied config, which it does within moments.
	DefaultTrustdWait = 15 * time.Second

	// DefaultProbeInterval spaces the probes of trustd while it has not
	// followed yet: each one refused counts against the caller's failure
	// budget there (trustd.DefaultFailureBurst).
	DefaultProbeInterval = 500 * time.Millisecond
)

// verdict is what a probe learned of trustd's view of a token.
type verdict int

const (
	verdictUnknown  verdict = iota // no answer about the token (yet)
	verdictAccepted                // judged valid, then the empty CSR refused
	verdictRefused                 // Unauthenticated
)

// probeTrustd presents tok to the member's trustd with no CSR, so that
// trustd, having judged the token, refuses the request for its CSR and
// issues nothing. A token accepted before the time sync meets the time
// gate (FailedPrecondition) instead, which also comes after the token.
func (r *Rotation) probeTrustd(ctx context.Context, m *Node, tok token.Token) (verdict, error) {
	endpoint := net.JoinHostPort(m.Addr, strconv.Itoa(wire.TrustdPort))

	_, _, err := join.GRPCTransport{CAs: r.trustdCAs}.Certificate(ctx, endpoint, tok, nil)

	switch status.Code(err) {
	case codes.Unauthenticated:
		return verdictRefused, err
	case codes.InvalidArgument, codes.FailedPrecondition:
		return verdictAccepted, err
	case codes.OK:
		return verdictUnknown, errors.New("trustd issued a certificate for an empty request")
	case codes.ResourceExhausted:
		return verdictUnknown, fmt.Errorf("checking trustd on %s: rate limited: %w", endpoint, err)
	default:
		return verdictUnknown, err
	}
}

// waitTrustd waits until the member's trustd accepts tok (accept) or
// refuses it: trustd follows machined's config a moment after it is
// applied.
func (r *Rotation) waitTrustd(ctx context.Context, m *Node, tok token.Token, accept bool) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.TrustdWait)
	defer cancel()

	want := map[bool]verdict{true: verdictAccepted, false: verdictRefused}[accept]

	for {
		got, err := r.probeTrustd(ctx, m, tok)

		switch {
		case got == want:
			return nil
		case got == verdictUnknown && err != nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded:
			return err // an answer that waiting does not change
		}

		if r.pause(ctx) != nil {
			what := map[bool]string{true: "accept", false: "refuse"}[accept]

			return fmt.Errorf("trustd on %s did not %s the token %s within %s (last answer: %v)",
				m.Addr, what, tok, r.opts.TrustdWait, err)
		}
	}
}

// pause waits the probe interval on the walker's clock, or until ctx
// ends.
func (r *Rotation) pause(ctx context.Context) error {
	t := r.w.Clock().NewTimer(r.opts.ProbeInterval)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
