package conformance

import (
	"context"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/wire"
)

// noNodeIP is an address of the cluster's range where no node runs.
const noNodeIP = "127.8.255.253"

// aliasCases are what apid makes of the spellings of a node: one node
// under many spellings is one node; a port is refused, and a name apid
// does not know or an address of no cluster node is refused (that node
// alone, in a fan-out) without a dial.
func aliasCases() []*Case {
	invalid := codes.InvalidArgument.String()
	nodes, node := wire.MetadataNodes, wire.MetadataNode
	aliases := "TARGET,::ffff:TARGET,0::ffff:TARGET,[::ffff:TARGET],0:0:0:0:0:ffff:TARGET"

	return []*Case{
		aliasRepliesCase("nodes naming the target under five spellings × Version", "OK, 1 reply from TARGET",
			[]string{nodes, aliases}, callVersionReplies),
		aliasRepliesCase("nodes naming the target under five spellings × ServiceRestart", "OK, 1 NotFound entry from TARGET",
			[]string{nodes, aliases}, callRestartReplies),
		callCase("node with port 22 × ServiceRestart", invalid, pickAdmin, []string{node, "TARGET:22"}, callRestart),
		callCase("node with the API port × ServiceRestart", invalid, pickAdmin, []string{node, "TARGET:50000"}, callRestart),
		callCase("nodes with a bracketed address and port × Events", invalid, pickReader, []string{nodes, "[::ffff:TARGET]:50000"}, callEvents),
		callCase("node naming an unknown DNS name × ServiceRestart", codes.Unavailable.String(), pickAdmin, []string{node, "nothing.invalid"}, callRestart),
		entryCase("nodes naming the target and localhost × Version: localhost alone refused", "Unavailable: "+notNodeMessage("localhost"),
			[]string{nodes, "TARGET,localhost"}),
		messageCase("node where no node runs × Version: refused, not dialed", "Unavailable: "+notNodeMessage(noNodeIP),
			[]string{node, "::ffff:" + noNodeIP}),
		entryCase("nodes where no node runs × Version: that node alone refused", "Unavailable: "+notNodeMessage(noNodeIP),
			[]string{nodes, "TARGET," + noNodeIP}),
	}
}

// aliasRepliesCase is fanOutCase that also says whose replies they are:
// every entry must name the target by its canonical address.
func aliasRepliesCase(name, want string, md []string, c repliesCall) *Case {
	inner := fanOutCase(name, want, md, c)
	run := inner.Run

	inner.Expected = strings.ReplaceAll(want, "TARGET", "the target")
	inner.Run = func(ctx context.Context, e *Env, r *Report) string {
		got := run(ctx, e, r)

		hosts, err := replyHosts(ctx, e, e.placeholders(md))
		if err != nil {
			r.Problemf("reading the reply's hosts: %v", err)
		}

		for _, h := range hosts {
			if h != e.Target {
				r.Problemf("reply entry from %q, want %q", h, e.Target)
			}
		}

		return got + " from the target"
	}

	return inner
}

// replyHosts makes Version as admin with md and returns its entries' hosts.
func replyHosts(ctx context.Context, e *Env, md []string) ([]string, error) {
	conn, err := e.dial(e.Target, e.ids.admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close() //nolint:errcheck // one call

	resp, err := machine.NewMachineServiceClient(conn).Version(withMetadata(ctx, md...), &emptypb.Empty{})

	var hosts []string
	for _, m := range resp.GetMessages() {
		hosts = append(hosts, m.GetMetadata().GetHostname())
	}

	return hosts, err
}

// messageCase makes Version as admin with md and returns its code and
// message.
func messageCase(name, want string, md []string) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			conn, err := e.dial(e.Target, e.ids.admin)
			if err != nil {
				r.Problemf("dial: %v", err)

				return "not run"
			}
			defer conn.Close() //nolint:errcheck // one call

			_, err = machine.NewMachineServiceClient(conn).Version(withMetadata(ctx, e.placeholders(md)...), &emptypb.Empty{})
			st := status.Convert(err)

			return fmt.Sprintf("%s: %s", st.Code(), st.Message())
		},
	}
}

// entryCase makes a Version fan-out as admin with md and returns the code
// and message of its error entries.
func entryCase(name, want string, md []string) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			conn, err := e.dial(e.Target, e.ids.admin)
			if err != nil {
				r.Problemf("dial: %v", err)

				return "not run"
			}
			defer conn.Close() //nolint:errcheck // one call

			resp, err := machine.NewMachineServiceClient(conn).Version(withMetadata(ctx, e.placeholders(md)...), &emptypb.Empty{})
			if err != nil {
				return codeOf(err)
			}

			var entries []string

			for _, m := range resp.GetMessages() {
				if st := m.GetMetadata().GetStatus(); st.GetCode() != 0 {
					entries = append(entries, fmt.Sprintf("%s: %s", codes.Code(st.GetCode()), st.GetMessage()))

					if e := m.GetMetadata().GetError(); !strings.HasSuffix(e, st.GetMessage()) { //nolint:staticcheck
						r.Problemf("entry error %q says more than its status", e)
					}
				}
			}

			return strings.Join(entries, "; ")
		},
	}
}
