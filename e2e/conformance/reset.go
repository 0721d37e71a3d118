package conformance

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
)

// resetCases check what of Reset is visible from outside and harmless:
// the RBAC refusal (admin only, as in Talos) and the refusals of what a
// node run by machined has not got, which come before anything is done.
func resetCases() []*Case {
	reset := func(req *machine.ResetRequest) func(context.Context, *grpc.ClientConn) (string, error) {
		return func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			_, err := machine.NewMachineServiceClient(c).Reset(ctx, req)

			return "", err
		}
	}

	return []*Case{
		resetCase("Reset by a reader", "PermissionDenied", pickReader, reset(&machine.ResetRequest{Graceful: true})),
		resetCase("Reset by an operator", "PermissionDenied", pickOperator, reset(&machine.ResetRequest{Graceful: true})),
		resetCase("Reset wiping STATE (the config) refused", "InvalidArgument", pickAdmin, reset(&machine.ResetRequest{
			Graceful: true, SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: "STATE", Wipe: true}},
		})),
		resetCase("Reset of user disks refused", "InvalidArgument", pickAdmin, reset(&machine.ResetRequest{
			Graceful: true, Mode: machine.ResetRequest_USER_DISKS,
		})),
	}
}

// resetCase is an apiCase of the reset group.
func resetCase(name, want string, pick func(*identities) Identity, c func(context.Context, *grpc.ClientConn) (string, error)) *Case {
	cs := apiCase(name, want, pick, nil, c)
	cs.Group = "reset"

	return cs
}
