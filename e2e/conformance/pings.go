package conformance

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/testutil/h2ping"
)

// pingCalls is how many calls one after the other a ping case makes: a
// server whose windows follow gRPC's bandwidth estimator pings on the
// first request data after each answered ping, so on every one of them.
const pingCalls = 5

// pingCases check that apid's calls made one after the other draw no
// HTTP/2 PING from it: a PING and its ACK per call would be a TLS record
// and a system call each way on top of the call's own.
func pingCases() []*Case {
	var cases []*Case

	for _, n := range []struct {
		name string
		node func(*Env) string
	}{
		{name: "the control plane", node: func(e *Env) string { return e.Target }},
		{name: "the worker", node: func(e *Env) string { return e.Worker }},
	} {
		cases = append(cases, &Case{
			Group: "apid", Name: fmt.Sprintf("%d Version calls on one connection to %s", pingCalls, n.name),
			Expected: "OK: no PING from the server",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				return versionPings(ctx, e, n.node(e))
			},
		})
	}

	return cases
}

// versionPings makes pingCalls Version calls as admin on a new connection
// to node's apid and says how many PINGs apid sent meanwhile.
func versionPings(ctx context.Context, e *Env, node string) string {
	var pings h2ping.Counter

	conn, err := grpc.NewClient(apidAddr(node),
		grpc.WithTransportCredentials(pings.Credentials(credentials.NewTLS(e.clientTLS(node, e.ids.admin)))))
	if err != nil {
		return err.Error()
	}
	defer conn.Close()

	mc := machine.NewMachineServiceClient(conn)

	for range pingCalls {
		if _, err = mc.Version(ctx, &emptypb.Empty{}); err != nil {
			return codeOf(err)
		}
	}

	n, err := pings.Pings()

	switch {
	case err != nil:
		return "reading apid's frames: " + err.Error()
	case n > 0:
		return fmt.Sprintf("OK: %d PINGs from the server", n)
	}

	return "OK: no PING from the server"
}
