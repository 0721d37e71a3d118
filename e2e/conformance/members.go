package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/membership"
)

// memberCases: the member list as os:reader sees it through a control
// plane (a worker's entry held by its connection), a member's hostname as
// routing target, who may write an entry, and the cluster health check's
// access rules.
func memberCases() []*Case {
	return []*Case{
		{Group: "members", Name: "List as os:reader on the target", Expected: "OK, target controlplane, worker worker held by its connection", Run: membersListed},
		{Group: "members", Name: "List on a worker", Expected: codes.FailedPrecondition.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, e.Worker, e.ids.reader, nil, listMembers(nil)))
		}},
		{Group: "members", Name: "Certified on a worker", Expected: codes.FailedPrecondition.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, e.Worker, e.ids.reader, nil, callCertified))
		}},
		{Group: "members", Name: "route node=HOSTNAME of the worker as os:reader", Expected: "OK, the worker answers", Run: routeByMemberName},
		{Group: "members", Name: "Heartbeat through apid as admin", Expected: codes.Unimplemented.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, e.Target, e.ids.admin, nil, heartbeat(e.Worker)))
		}},
		{Group: "members", Name: "Heartbeat to trustd with an admin client certificate", Expected: codes.Unauthenticated.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.trustdHeartbeat(ctx, e.ids.admin))
		}},
		{Group: "members", Name: "Heartbeat to trustd without a certificate", Expected: codes.Unauthenticated.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.trustdHeartbeat(ctx, Identity{}))
		}},
		{Group: "members", Name: "HealthCheck as os:reader on the target", Expected: "allowed, member list read", Run: healthCheckAllowed},
		{Group: "members", Name: "HealthCheck on a worker", Expected: codes.FailedPrecondition.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, e.Worker, e.ids.reader, nil, func(ctx context.Context, c *grpc.ClientConn) error {
				_, err := firstHealthMessage(ctx, c)

				return err
			}))
		}},
	}
}

func listMembers(out *[]*membership.Member) call {
	return func(ctx context.Context, c *grpc.ClientConn) error {
		resp, err := membership.NewMembershipServiceClient(c).List(ctx, &membership.ListRequest{})
		if err == nil && out != nil {
			*out = resp.GetMessages()[0].GetMembers()
		}

		return err
	}
}

func heartbeat(addr string) call {
	return func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := membership.NewMembershipServiceClient(c).Heartbeat(ctx, &membership.HeartbeatRequest{Member: &membership.Member{
			Hostname: "conformance", Addresses: []string{addr}, Interval: durationpb.New(memberCaseInterval),
		}})

		return err
	}
}

// trustdHeartbeat sends the worker's entry to the target's trustd
// presenting id.
func (e *Env) trustdHeartbeat(ctx context.Context, id Identity) error {
	cfg := e.clientTLS(e.Target, id)

	conn, err := dialTLS(trustdAddr(e.Target), cfg)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // one call

	return heartbeat(e.Worker)(ctx, conn)
}

// memberRoles finds the role of the target and the worker in the list.
func (e *Env) memberRoles(members []*membership.Member) (target, worker *membership.Member) {
	for _, m := range members {
		switch m.GetAddresses()[0] {
		case e.Target:
			target = m
		case e.Worker:
			worker = m
		}
	}

	return target, worker
}

// listedMembers lists the members as os:reader, waiting up to
// memberWait for the target and the worker to be listed: right after the
// cluster's creation their first heartbeats may still be on their way.
func (e *Env) listedMembers(ctx context.Context) ([]*membership.Member, error) {
	deadline := time.Now().Add(memberWait)

	for {
		var members []*membership.Member

		err := e.callAs(ctx, e.Target, e.ids.reader, nil, listMembers(&members))
		if target, worker := e.memberRoles(members); err != nil || (target != nil && worker != nil) || time.Now().After(deadline) {
			return members, err
		}

		select {
		case <-ctx.Done():
			return members, ctx.Err()
		case <-time.After(memberPoll):
		}
	}
}

func membersListed(ctx context.Context, e *Env, r *Report) string {
	members, err := e.listedMembers(ctx)
	if err != nil {
		return codeOf(err)
	}

	target, worker := e.memberRoles(members)
	if target == nil || worker == nil {
		r.Problemf("members: %v", members)

		return fmt.Sprintf("OK, %d members without the target or the worker", len(members))
	}

	for _, m := range members {
		if m.GetLastSeen() == nil || m.GetVersion() == "" {
			r.Problemf("entry without last seen or version: %v", m)
		}
	}

	// A worker's entry is held by its connection to a control plane's
	// trustd; a control plane writes its own.
	held := "held by its connection"
	if !worker.GetHeld() {
		held = "not held"
	}

	if target.GetHeld() {
		r.Problemf("the control plane's own entry is held: %v", target)
	}

	return fmt.Sprintf("OK, target %s, worker %s %s", target.GetRole(), worker.GetRole(), held)
}

func routeByMemberName(ctx context.Context, e *Env, r *Report) string {
	members, err := e.listedMembers(ctx)
	if err != nil {
		return codeOf(err)
	}

	_, worker := e.memberRoles(members)
	if worker == nil {
		return "worker not a member"
	}

	var resp *machine.HostnameResponse

	err = e.callAs(ctx, e.Target, e.ids.reader, []string{"node", strings.ToUpper(worker.GetHostname())}, func(ctx context.Context, c *grpc.ClientConn) error {
		var err error
		resp, err = machine.NewMachineServiceClient(c).Hostname(ctx, &emptypb.Empty{})

		return err
	})
	if err != nil {
		return codeOf(err)
	}

	if got := resp.GetMessages()[0].GetHostname(); got != worker.GetHostname() {
		r.Problemf("answered by %q", got)

		return "OK, another node answers"
	}

	return "OK, the worker answers"
}

func healthCheckAllowed(ctx context.Context, e *Env, r *Report) string {
	if _, err := e.listedMembers(ctx); err != nil {
		return codeOf(err)
	}

	var first string

	err := e.callAs(ctx, e.Target, e.ids.reader, nil, func(ctx context.Context, c *grpc.ClientConn) error {
		var err error
		first, err = firstHealthMessage(ctx, c)

		return err
	})
	if err != nil {
		return codeOf(err)
	}

	if !strings.HasPrefix(first, "member list: ok") {
		r.Problemf("first progress message %q", first)

		return "allowed, member list not read"
	}

	return "allowed, member list read"
}

// firstHealthMessage opens a one-round HealthCheck and returns its first
// progress message.
func firstHealthMessage(ctx context.Context, c *grpc.ClientConn) (string, error) {
	stream, err := cluster.NewClusterServiceClient(c).HealthCheck(ctx, &cluster.HealthCheckRequest{})
	if err != nil {
		return "", err
	}

	msg, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return "", nil
	}

	return msg.GetMessage(), err
}

// memberCaseInterval is the interval of the entries the cases try to
// write: valid, so that only the caller's identity decides.
const memberCaseInterval = 10 * time.Second

// memberWait bounds the wait for the target and the worker to be listed:
// a few heartbeat retries after the cluster's bootstrap; memberPoll is
// the pause between two looks.
const (
	memberWait = 30 * time.Second
	memberPoll = 500 * time.Millisecond
)
