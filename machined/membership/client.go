package membership

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"

	"github.com/aegis-os/aegis/api/membership"
)

// Caller calls the control planes' trustd with the node certificate, one
// endpoint after the other until call succeeds (trustdclient.Client). The
// node certificate proves the entry's addresses are the node's.
type Caller interface {
	Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error)
}

// Connections is a Caller that tells whether the connection a call went
// over, named by its endpoint and its local address, is still open
// (trustdclient.Client's Open).
type Connections interface {
	Open(endpoint, local string) bool
}

// Sender sends a worker's heartbeats to the control planes' trustd, one
// endpoint after the other until one records it. When the control plane
// says it holds the entry for as long as the connection stays open
// (HeartbeatResponse.hold) and Trustd is Connections, Send sends nothing
// while that connection is open, the entry unchanged and the hold not yet
// due: the worker's connection says it is there. Use one Sender per
// worker, by pointer; it is safe for concurrent use.
type Sender struct {
	// Trustd reaches the control planes' trustd. Required.
	Trustd Caller
	// Clock times the holds. Nil is the system's.
	Clock clock.Clock

	mu   sync.Mutex
	held *heldBy
}

// heldBy is what the last heartbeat's control plane holds, and where.
type heldBy struct {
	entry           *Member
	endpoint, local string
	until           time.Time
}

// Send records m through the first control plane that takes it, unless
// one holds it as m says (see Sender).
func (s *Sender) Send(ctx context.Context, m *Member) error {
	if s.Held(m) {
		return nil
	}

	var (
		p    peer.Peer
		hold time.Duration
	)

	ep, err := s.call(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		resp, err := c.Heartbeat(ctx, &membership.HeartbeatRequest{Member: m}, grpc.Peer(&p))
		hold = resp.GetHold().AsDuration()

		return err
	})

	s.mu.Lock()
	defer s.mu.Unlock()

	s.held = nil

	if _, ok := s.Trustd.(Connections); err == nil && ok && hold > 0 && p.LocalAddr != nil {
		s.held = &heldBy{entry: proto.CloneOf(m), endpoint: ep, local: p.LocalAddr.String(), until: s.now().Add(hold)}
	}

	return err
}

// Held reports whether a control plane holds the entry as m says, on a
// connection still open, and its hold is not yet due; nil m asks whether
// it holds the entry last sent.
func (s *Sender) Held(m *Member) bool {
	s.mu.Lock()
	h := s.held
	s.mu.Unlock()

	conns, ok := s.Trustd.(Connections)
	if h == nil || !ok || !s.now().Before(h.until) || m != nil && !proto.Equal(h.entry, m) {
		return false
	}

	return conns.Open(h.endpoint, h.local)
}

func (s *Sender) now() time.Time { return defaults.Clock(s.Clock).Now() }

// Leave removes the node's entry, whose first address is address, through
// the first control plane that takes it.
func (s *Sender) Leave(ctx context.Context, address string) error {
	s.mu.Lock()
	s.held = nil
	s.mu.Unlock()

	_, err := s.call(ctx, func(ctx context.Context, c membership.MembershipServiceClient) error {
		_, err := c.Leave(ctx, &membership.LeaveRequest{Address: address})

		return err
	})

	return err
}

// call makes call on one control plane after the other until one answers
// without error; one that is up but answers too late ends it, until it has
// been slow for trustdclient.SlowFor (the Client's Call).
// It returns the endpoint that answered.
func (s *Sender) call(ctx context.Context, call func(context.Context, membership.MembershipServiceClient) error) (string, error) {
	if s.Trustd == nil {
		return "", errors.New("membership: no client to reach the control planes' trustd")
	}

	return s.Trustd.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()

		return call(ctx, membership.NewMembershipServiceClient(conn))
	})
}
