package conformance

import (
	"context"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/machineconfig"
)

// badMachineConfig has three problems, each at its own field path.
const badMachineConfig = `version: v9
machine:
  type: worker
  token: not-a-token
  ca:
    crt: ""
  time:
    trustHostClock: true
cluster:
  name: "Not A Label"
  controlPlane:
    endpoints: [127.0.0.1]
`

// machineConfigCases check ApplyConfiguration and the machine config's
// read from outside, without changing either node: who may call them, a
// config with several problems refused whole with every field path, and a
// dry run of the node's own config, which changes nothing.
func machineConfigCases() []*Case {
	apply := func(req *machine.ApplyConfigurationRequest) call {
		return func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := machine.NewMachineServiceClient(c).ApplyConfiguration(ctx, req)

			return err
		}
	}
	get := func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machineconfig.NewMachineConfigServiceClient(c).Get(ctx, &machineconfig.GetRequest{Redact: true})

		return err
	}
	as := func(name string, worker bool, id func(*identities) Identity, want codes.Code, c call) *Case {
		return &Case{Group: "apid", Name: name, Expected: want.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			node := e.Target
			if worker {
				node = e.Worker
			}

			return codeOf(e.callAs(ctx, node, id(e.ids), nil, c))
		}}
	}
	admin := func(i *identities) Identity { return i.admin }
	operator := func(i *identities) Identity { return i.operator }
	reader := func(i *identities) Identity { return i.reader }

	return []*Case{
		as("ApplyConfiguration as os:operator", false, operator, codes.PermissionDenied,
			apply(&machine.ApplyConfigurationRequest{Data: []byte(badMachineConfig), DryRun: true})),
		as("ApplyConfiguration as os:reader on the worker", true, reader, codes.PermissionDenied,
			apply(&machine.ApplyConfigurationRequest{Data: []byte(badMachineConfig), DryRun: true})),
		// On the worker: the config is a worker's, which apid sends only there.
		as("ApplyConfiguration with an unknown mode", true, admin, codes.InvalidArgument,
			apply(&machine.ApplyConfigurationRequest{Data: []byte(badMachineConfig), Mode: 42})),
		as("MachineConfigService/Get as os:operator", false, operator, codes.PermissionDenied, get),
		as("MachineConfigService/Get as admin on the worker", true, admin, codes.OK, get),
		{
			Group: "apid", Name: "ApplyConfiguration of a config with problems lists each field path",
			Expected: "InvalidArgument: version, machine.token, cluster.name",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				err := e.callAs(ctx, e.Worker, e.ids.admin, nil, apply(&machine.ApplyConfigurationRequest{
					Data: []byte(badMachineConfig), Mode: machine.ApplyConfigurationRequest_AUTO,
				}))

				var named []string

				for _, path := range []string{"version", "machine.token", "cluster.name"} {
					if strings.Contains(status.Convert(err).Message(), path+":") {
						named = append(named, path)
					}
				}

				return codeOf(err) + ": " + strings.Join(named, ", ")
			},
		},
		{
			Group: "apid", Name: "ApplyConfiguration dry run of the node's own config",
			Expected: "OK: No changes.",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				var details string

				err := e.callAs(ctx, e.Worker, e.ids.admin, nil, func(ctx context.Context, c *grpc.ClientConn) error {
					cur, err := machineconfig.NewMachineConfigServiceClient(c).Get(ctx, &machineconfig.GetRequest{})
					if err != nil {
						return err
					}

					resp, err := machine.NewMachineServiceClient(c).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
						Data: cur.GetMessages()[0].GetData(), Mode: machine.ApplyConfigurationRequest_AUTO, DryRun: true,
					})
					if err == nil {
						details = strings.TrimPrefix(resp.GetMessages()[0].GetModeDetails(), "Dry run summary:\n")
					}

					return err
				})
				if err != nil {
					return codeOf(err)
				}

				return "OK: " + strings.TrimSpace(details)
			},
		},
	}
}
