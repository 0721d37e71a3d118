package conformance

import (
	"bytes"
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// etcdCases check the etcd methods on the target control plane and the
// worker as an admin: the cluster create made bootstrapped a cluster whose
// members all vote, and every refusal below leaves it as it was.
func etcdCases() []*Case {
	admin := func(i *identities) Identity { return i.admin }

	onWorker := func(name, want string, c call) *Case {
		return &Case{Group: "etcd", Name: name, Expected: want, Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, e.Worker, admin(e.ids), nil, c))
		}}
	}

	return []*Case{
		{Group: "etcd", Name: "EtcdMemberList on the target: every member votes", Expected: "OK, all voting", Run: etcdAllVoting},
		etcdCase("a second Bootstrap", codes.FailedPrecondition, func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := machine.NewMachineServiceClient(c).Bootstrap(ctx, &machine.BootstrapRequest{})

			return err
		}),
		etcdCase("EtcdRemoveMemberByID of an unknown member", codes.NotFound, func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := machine.NewMachineServiceClient(c).EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: 0xc0ffee})

			return err
		}),
		etcdCase("EtcdRecover of a file that is not a snapshot", codes.InvalidArgument, callRecoverGarbage),
		onWorker("Bootstrap on a worker", codes.FailedPrecondition.String(), func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := machine.NewMachineServiceClient(c).Bootstrap(ctx, &machine.BootstrapRequest{})

			return err
		}),
		onWorker("EtcdMemberList on a worker", codes.FailedPrecondition.String(), func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := machine.NewMachineServiceClient(c).EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})

			return err
		}),
	}
}

// etcdCase makes one call on the target as an admin and expects want.
func etcdCase(name string, want codes.Code, c call) *Case {
	return &Case{Group: "etcd", Name: name, Expected: want.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
		return codeOf(e.callAs(ctx, e.Target, e.ids.admin, nil, c))
	}}
}

func etcdAllVoting(ctx context.Context, e *Env, _ *Report) string {
	var resp *machine.EtcdMemberListResponse

	err := e.callAs(ctx, e.Target, e.ids.admin, nil, func(ctx context.Context, c *grpc.ClientConn) error {
		var err error

		resp, err = machine.NewMachineServiceClient(c).EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})

		return err
	})
	if err != nil {
		return codeOf(err)
	}

	members := resp.GetMessages()[0].GetMembers()
	for _, m := range members {
		if m.GetIsLearner() || m.GetHostname() == "" {
			return fmt.Sprintf("OK, %s not voting", m.GetHostname())
		}
	}

	if len(members) == 0 {
		return "OK, no members"
	}

	return "OK, all voting"
}

// callRecoverGarbage uploads bytes that are no etcd snapshot.
func callRecoverGarbage(ctx context.Context, c *grpc.ClientConn) error {
	stream, err := machine.NewMachineServiceClient(c).EtcdRecover(ctx)
	if err != nil {
		return err
	}

	if err = stream.Send(&common.Data{Bytes: bytes.Repeat([]byte("conformance "), 4096)}); err != nil {
		return err
	}

	_, err = stream.CloseAndRecv()

	return err
}
