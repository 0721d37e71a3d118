package membership

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/membership"
)

// Caller calls the control planes' trustd with the node certificate, one
// endpoint after the other until call succeeds (trustdclient.Client). The
// node certificate proves the entry's addresses are the node's.
type Caller interface {
	Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error)
}

// Sender sends a worker's heartbeats to the control planes' trustd, one
// endpoint after the other until one records it.
type Sender struct {
	// Trustd reaches the control planes' trustd. Required.
	Trustd Caller
}

// Send records m through the first control plane that takes it.
func (s Sender) Send(ctx context.Context, m *Member) error {
	return s.first(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		_, err := c.Heartbeat(ctx, &membership.HeartbeatRequest{Member: m})

		return err
	})
}

// Leave removes the node's entry, whose first address is address, through
// the first control plane that takes it.
func (s Sender) Leave(ctx context.Context, address string) error {
	return s.first(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		_, err := c.Leave(ctx, &membership.LeaveRequest{Address: address})

		return err
	})
}

// first makes call on one control plane after the other until one answers
// without error; one that is up but answers too late ends it, until it has
// been slow for trustdclient.SlowFor (the Client's Call).
func (s Sender) first(ctx context.Context, call func(context.Context, membership.MembershipServiceClient) error) error {
	if s.Trustd == nil {
		return errors.New("membership: no client to reach the control planes' trustd")
	}

	_, err := s.Trustd.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()

		return call(ctx, membership.NewMembershipServiceClient(conn))
	})

	return err
}
