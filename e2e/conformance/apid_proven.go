package conformance

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/internal/wire"
)

// provenCases: apid routes only to nodes of the cluster (this node, a
// control-plane endpoint, a live member), without dialing anything else
// (a node it does not know is Unavailable: it may be one rejoining),
// and never sends a control plane's configuration, which carries the
// cluster's CA keys, to a worker.
func provenCases() []*Case {
	node := wire.MetadataNode
	notNode := func(target string) string { return "Unavailable: " + notNodeMessage(target) }

	return []*Case{
		messageCase("node 127.0.0.1 × Version", notNode("127.0.0.1"), []string{node, "127.0.0.1"}),
		messageCase("node 169.254.169.254 × Version", notNode("169.254.169.254"), []string{node, "169.254.169.254"}),
		{
			Group: "apid", Name: "node where a stranger listens × Version: refused, not dialed",
			Expected: notNode(noNodeIP) + "; 0 connections", Run: strangerNotDialed,
		},
		{
			Group: "apid", Name: "ApplyConfiguration of a controlplane config to the worker through the target",
			Expected: "FailedPrecondition: apid: node WORKER is a worker; the configuration is for a controlplane: refused, it carries the cluster's CA keys",
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return e.applyTargetConfig(ctx, r, e.Target, []string{node, e.Worker})
			},
		},
		{
			Group: "apid", Name: "ApplyConfiguration of a controlplane config on the worker itself",
			Expected: "FailedPrecondition: apid: this node is a worker; the configuration is for a controlplane: refused, it carries the cluster's CA keys",
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return e.applyTargetConfig(ctx, r, e.Worker, nil)
			},
		},
	}
}

// strangerNotDialed listens where no node runs, on the API port, and
// routes a call there: apid must refuse it without connecting.
func strangerNotDialed(ctx context.Context, e *Env, r *Report) string {
	lis, err := net.Listen("tcp", net.JoinHostPort(noNodeIP, strconv.Itoa(wire.APIDPort)))
	if err != nil {
		r.Problemf("listen: %v", err)

		return "not run"
	}
	defer lis.Close() //nolint:errcheck // the case's own listener

	var accepted atomic.Int32

	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}

			accepted.Add(1)
			conn.Close() //nolint:errcheck,gosec // counted, that is all
		}
	}()

	err = e.callAs(ctx, e.Target, e.ids.admin, []string{wire.MetadataNode, noNodeIP}, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).Version(ctx, &emptypb.Empty{})

		return err
	})
	st := status.Convert(err)

	return fmt.Sprintf("%s: %s; %d connections", st.Code(), st.Message(), accepted.Load())
}

// applyTargetConfig reads the target's configuration (redacted: apid
// reads only its machine type) and applies it, as a dry run, at node's
// apid with routing metadata md; it returns the code and message, with
// the worker's address written WORKER.
func (e *Env) applyTargetConfig(ctx context.Context, r *Report, node string, md []string) string {
	var data []byte

	err := e.callAs(ctx, e.Target, e.ids.admin, nil, func(ctx context.Context, c *grpc.ClientConn) error {
		resp, err := machineconfig.NewMachineConfigServiceClient(c).Get(ctx, &machineconfig.GetRequest{Redact: true})
		if err == nil {
			data = resp.GetMessages()[0].GetData()
		}

		return err
	})
	if err != nil {
		r.Problemf("reading the target's config: %v", err)

		return "not run"
	}

	err = e.callAs(ctx, node, e.ids.admin, md, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
			Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT, DryRun: true,
		})

		return err
	})
	st := status.Convert(err)

	return strings.ReplaceAll(fmt.Sprintf("%s: %s", st.Code(), st.Message()), e.Worker, "WORKER")
}

// notNodeMessage is apid's refusal of target, a node it does not know.
func notNodeMessage(target string) string {
	return fmt.Sprintf("apid: node %q is neither this node, a control-plane endpoint nor a live member: "+
		"nothing was sent to it; a node that is rejoining is a member again after its first heartbeat", target)
}
