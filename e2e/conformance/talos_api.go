package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	cosiapi "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	cosiclient "github.com/cosi-project/runtime/pkg/state/protobuf/client"
	"github.com/siderolabs/talos/pkg/machinery/api/inspect"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"
	machineconf "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// talosAPICases check the Talos API beyond the MachineService as an
// operator meets it: the resource API (read-only, the machine config
// redacted, `node` routing, no `nodes` fan-out as in Talos), the
// TimeService, Processes, and the answers of what a node does not do.
func talosAPICases() []*Case {
	reader := func(i *identities) Identity { return i.reader }
	onWorker := []string{"node", "WORKER"}

	return []*Case{
		apiCase("resources: rd lists the definitions", "OK, definitions", reader, nil, listDefinitions),
		apiCase("resources: machinestatus of the worker through the target", "running, ready", reader, onWorker, workerMachineStatus),
		apiCase("resources: Create by a reader", codes.PermissionDenied.String(), reader, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			return "", cosiState(c).Create(ctx, v1alpha1.NewService("conformance"))
		}),
		apiCase("resources: Destroy by an admin", codes.PermissionDenied.String(), pickAdmin, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			return "", cosiState(c).Destroy(ctx, runtime.NewMachineStatus().Metadata())
		}),
		apiCase("resources: `nodes` fan-out refused as in Talos", codes.InvalidArgument.String(), reader, []string{"nodes", "TARGET,WORKER"}, listDefinitions),
		apiCase("resources: machine config served without secrets", "redacted", reader, nil, machineConfigRedacted),
		apiCase("resources: members on the target", "OK, control plane and worker listed", reader, nil, clusterMembers),
		apiCase("resources: upgrade status of the worker, as a reader", "OK, the installed version active", reader, onWorker, upgradeStatus),
		apiCase("TimeService Time as a reader", codes.OK.String(), reader, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			_, err := timeapi.NewTimeServiceClient(c).Time(ctx, &emptypb.Empty{})

			return "", err
		}),
		apiCase("Processes lists the node's machined", "OK, machined listed", reader, nil, processesOfNode),
		apiCase("Dmesg of a node on a host", codes.FailedPrecondition.String(), reader, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			s, err := machine.NewMachineServiceClient(c).Dmesg(ctx, &machine.DmesgRequest{})

			return "", firstRecv(s, err)
		}),
		apiCase("Rollback of a node never upgraded", "FailedPrecondition, no previous version", pickAdmin, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			_, err := machine.NewMachineServiceClient(c).Rollback(ctx, &machine.RollbackRequest{})
			if st := status.Convert(err); st.Code() == codes.FailedPrecondition && strings.Contains(st.Message(), "no previous version") {
				return "FailedPrecondition, no previous version", nil
			}

			return "", err
		}),
		apiCase("Upgrade by an operator", codes.PermissionDenied.String(), pickOperator, nil, upgradeFrom("/nonexistent/aegis.bundle")),
		apiCase("Upgrade naming a bundle the node does not have", codes.NotFound.String(), pickAdmin, nil, upgradeFrom("/nonexistent/aegis.bundle")),
		apiCase("bundle Upload by an operator", codes.PermissionDenied.String(), pickOperator, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			stream, err := upgradeapi.NewBundleServiceClient(c).Upload(ctx)
			if err != nil {
				return "", err
			}

			// A header for an empty bundle: were the call let through, the
			// node would refuse it for its size, and keep nothing.
			if err = stream.Send(&upgradeapi.UploadRequest{Header: &upgradeapi.UploadHeader{Size: 1, Sha256: strings.Repeat("0", 64)}}); err != nil && !errors.Is(err, io.EOF) {
				return "", err
			}

			_, err = stream.CloseAndRecv()

			return "", err
		}),
		apiCase("a Talos service the node lacks: no \"unknown service\"", "Unimplemented, named", pickAdmin, nil, func(ctx context.Context, c *grpc.ClientConn) (string, error) {
			_, err := inspect.NewInspectServiceClient(c).ControllerRuntimeDependencies(ctx, &emptypb.Empty{})

			return namedUnimplemented(err, "ControllerRuntimeDependencies")
		}),
	}
}

// apiCase makes one call on the target as the identity pick chooses, with
// metadata md; the call describes its result, or its code is the result.
func apiCase(name, want string, pick func(*identities) Identity, md []string, c func(context.Context, *grpc.ClientConn) (string, error)) *Case {
	return &Case{Group: "talos-api", Name: name, Expected: want, Run: func(ctx context.Context, e *Env, _ *Report) string {
		var got string

		err := e.callAs(ctx, e.Target, pick(e.ids), e.placeholders(md), func(ctx context.Context, conn *grpc.ClientConn) error {
			var err error

			got, err = c(ctx, conn)

			return err
		})
		if err != nil || got == "" {
			return grpcCode(err)
		}

		return got
	}}
}

// grpcCode is the code of an error, also when the COSI client wrapped it
// (OK for nil).
func grpcCode(err error) string {
	if code := status.Code(err); code != codes.Unknown {
		return code.String()
	}

	for _, c := range []codes.Code{codes.PermissionDenied, codes.InvalidArgument, codes.NotFound, codes.Unimplemented} {
		if strings.Contains(err.Error(), "code = "+c.String()) {
			return c.String()
		}
	}

	return codes.Unknown.String()
}

func cosiState(c *grpc.ClientConn) state.State {
	return state.WrapCore(cosiclient.NewAdapter(cosiapi.NewStateClient(c)))
}

func listDefinitions(ctx context.Context, c *grpc.ClientConn) (string, error) {
	rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, cosiState(c))
	if err != nil {
		return "", err
	}

	if rds.Len() < 10 {
		return fmt.Sprintf("OK, %d definitions", rds.Len()), nil
	}

	return "OK, definitions", nil
}

// clusterMembers describes the Members resources (talosctl get members) of
// a control plane: the member list in etcd, control planes and workers.
func clusterMembers(ctx context.Context, c *grpc.ClientConn) (string, error) {
	list, err := safe.StateListAll[*cluster.Member](ctx, cosiState(c))
	if err != nil {
		return "", err
	}

	types := map[machineconf.Type]bool{}
	for m := range list.All() {
		types[m.TypedSpec().MachineType] = true
	}

	switch {
	case types[machineconf.TypeControlPlane] && types[machineconf.TypeWorker]:
		return "OK, control plane and worker listed", nil
	default:
		return fmt.Sprintf("OK, %d members: %v", list.Len(), types), nil
	}
}

// upgradeStatus describes a node's UpgradeStatus (aegisctl get upgrade):
// a node of the suite's cluster was never upgraded.
func upgradeStatus(ctx context.Context, c *grpc.ClientConn) (string, error) {
	st, err := safe.StateGet[*resourcetypes.UpgradeStatus](ctx, cosiState(c), resourcetypes.NewUpgradeStatus().Metadata())
	if err != nil {
		return "", err
	}

	if spec := st.TypedSpec(); spec.ActiveSlot != "installed" || spec.ActiveVersion == "" || spec.OnTrial || !spec.LastRollback.IsZero() {
		return fmt.Sprintf("%+v", *spec), nil
	}

	return "OK, the installed version active", nil
}

func workerMachineStatus(ctx context.Context, c *grpc.ClientConn) (string, error) {
	ms, err := safe.StateGet[*runtime.MachineStatus](ctx, cosiState(c), runtime.NewMachineStatus().Metadata())
	if err != nil {
		return "", err
	}

	ready := "not ready"
	if ms.TypedSpec().Status.Ready {
		ready = "ready"
	}

	return ms.TypedSpec().Stage.String() + ", " + ready, nil
}

func machineConfigRedacted(ctx context.Context, c *grpc.ClientConn) (string, error) {
	mc, err := safe.StateGet[*resourcetypes.MachineConfig](ctx, cosiState(c), resourcetypes.NewMachineConfig().Metadata())
	if err != nil {
		return "", err
	}

	doc := mc.TypedSpec().Document
	if strings.Contains(doc, "PRIVATE KEY") || !strings.Contains(doc, resourceapi.RedactedValue) {
		return "secrets served", nil
	}

	return "redacted", nil
}

func processesOfNode(ctx context.Context, c *grpc.ClientConn) (string, error) {
	resp, err := machine.NewMachineServiceClient(c).Processes(ctx, &emptypb.Empty{})
	if err != nil {
		return "", err
	}

	for _, p := range resp.GetMessages()[0].GetProcesses() {
		if p.GetCommand() == "machined" {
			return "OK, machined listed", nil
		}
	}

	return "OK, no machined", nil
}

// namedUnimplemented describes an Unimplemented answer by whether it names
// the method.
func namedUnimplemented(err error, method string) (string, error) {
	st := status.Convert(err)

	switch {
	case st.Code() != codes.Unimplemented:
		return "", err
	case strings.Contains(st.Message(), "unknown service") || !strings.Contains(st.Message(), method):
		return "Unimplemented: " + st.Message(), nil
	}

	return "Unimplemented, named", nil
}

// upgradeFrom calls MachineService.Upgrade with image, a bundle path no
// node has: an upgrade that is let through is refused before anything
// changes.
func upgradeFrom(image string) func(context.Context, *grpc.ClientConn) (string, error) {
	return func(ctx context.Context, c *grpc.ClientConn) (string, error) {
		_, err := machine.NewMachineServiceClient(c).Upgrade(ctx, &machine.UpgradeRequest{Image: image, Preserve: true})

		return "", err
	}
}
