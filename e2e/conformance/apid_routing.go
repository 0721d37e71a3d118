package conformance

import (
	"context"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/wire"
)

// withMetadata adds key, value pairs to ctx's outgoing metadata.
func withMetadata(ctx context.Context, kv ...string) context.Context {
	if len(kv) == 0 {
		return ctx
	}

	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func pickAdmin(i *identities) Identity        { return i.admin }
func pickReader(i *identities) Identity       { return i.reader }
func pickOperator(i *identities) Identity     { return i.operator }
func pickUnknown(i *identities) Identity      { return i.unknownRoles }
func pickNoRoles(i *identities) Identity      { return i.noRoles }
func pickImpersonator(i *identities) Identity { return i.impersonator }

// identityCases are callers whose roles, or whose role metadata, must
// grant nothing.
func identityCases() []*Case {
	pd := codes.PermissionDenied.String()
	roleKey := wire.MetadataRole

	return []*Case{
		callCase("only unknown roles (os:root, os:superuser) × ServiceList", pd, pickUnknown, nil, callServiceList),
		callCase("no role at all × ServiceList", pd, pickNoRoles, nil, callServiceList),
		callCase("os:impersonator alone × ServiceList", pd, pickImpersonator, nil, callServiceList),
		callCase("talos-role os:admin from a reader × GenerateClientConfiguration", pd, pickReader, []string{roleKey, "os:admin"}, callClientConfig),
		callCase("talos-role os:admin from unknown roles × ServiceList", pd, pickUnknown, []string{roleKey, "os:admin"}, callServiceList),
		callCase("talos-role os:admin from a reader × TokenService.List through nodes", pd, pickReader,
			[]string{roleKey, "os:admin", wire.MetadataNodes, "TARGET,WORKER"}, callTokenList),
		callCase("impersonator passing os:impersonator × ServiceList", pd, pickImpersonator, []string{roleKey, "os:impersonator"}, callServiceList),
		callCase("impersonator passing 17 roles × ServiceList", codes.InvalidArgument.String(), pickImpersonator,
			[]string{roleKey, strings.Repeat("os:reader,", authz.MaxMetadataRoles+1)}, callServiceList),
		callCase("reader opens EtcdSnapshot through nodes", pd, pickReader, []string{wire.MetadataNodes, "TARGET,WORKER"}, callEtcdSnapshot),
		callCase("reader opens Read stream", pd, pickReader, nil, callRead),
		callCase("unknown roles open Events", pd, pickUnknown, nil, callEvents),
		callCase("no role opens Logs", pd, pickNoRoles, nil, callLogs),
	}
}

// routingCases are `node`/`nodes` metadata apid must refuse or follow
// exactly.
func routingCases() []*Case {
	invalid := codes.InvalidArgument.String()
	nodes, node := wire.MetadataNodes, wire.MetadataNode

	return []*Case{
		fanOutCase("nodes naming hosts of no cluster node × ServiceRestart: each refused, none dialed", "OK, 2 Unavailable entries",
			[]string{nodes, "127.8.255.253,127.8.255.254"}, callRestartReplies),
		fanOutCase("nodes naming the target three times × Version", "OK, 1 reply",
			[]string{nodes, "TARGET, TARGET", nodes, "TARGET"}, callVersionReplies),
		callCase(fmt.Sprintf("nodes naming %d hosts × ServiceRestart", apid.MaxFanOut+1), invalid, pickAdmin,
			[]string{nodes, manyHosts(apid.MaxFanOut + 1)}, callRestart),
		callCase("node and nodes together × ServiceRestart", invalid, pickAdmin, []string{node, "TARGET", nodes, "TARGET"}, callRestart),
		callCase("node with two values × ServiceRestart", invalid, pickAdmin, []string{node, "TARGET", node, "WORKER"}, callRestart),
		callCase("nodes naming no host × ServiceRestart", invalid, pickAdmin, []string{nodes, " , ,"}, callRestart),
		callCase("nodes naming a URL × ServiceRestart", invalid, pickAdmin, []string{nodes, "https://TARGET/"}, callRestart),
		callCase("nodes naming a user@host × ServiceRestart", invalid, pickAdmin, []string{nodes, "root@TARGET"}, callRestart),
		callCase("node name of 300 bytes × ServiceRestart", invalid, pickAdmin, []string{node, strings.Repeat("a", 300)}, callRestart),
		callCase("nodes on a service that cannot merge (grpc.health)", invalid, pickAdmin, []string{nodes, "TARGET,WORKER"}, callHealth),
		workerCase("worker asked to forward to the target (node)", codes.PermissionDenied.String(), []string{node, "TARGET"}),
		workerCase("worker asked to fan out (nodes)", codes.PermissionDenied.String(), []string{nodes, "WORKER,TARGET"}),
		fanOutCase("impersonator with nodes is served locally × ServiceList", "OK, 1 reply",
			[]string{wire.MetadataRole, "os:reader", nodes, "TARGET,WORKER"}, callServiceListReplies),
	}
}

// manyHosts names n distinct loopback hosts.
func manyHosts(n int) string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("127.8.254.%d", i%250+1)
		if i >= 250 {
			hosts[i] = fmt.Sprintf("127.8.253.%d", i-250+1)
		}
	}

	return strings.Join(hosts, ",")
}

// placeholders puts the nodes' addresses in place of TARGET, WORKER and
// PROBE in values (metadata, node lists).
func (e *Env) placeholders(md []string) []string {
	if md == nil {
		return nil
	}

	out := make([]string, len(md))
	r := strings.NewReplacer("TARGET", e.Target, "WORKER", e.Worker, "PROBE", e.Probe)

	for i, v := range md {
		out[i] = r.Replace(v)
	}

	return out
}

var callHealth call = func(ctx context.Context, c *grpc.ClientConn) error {
	_, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})

	return err
}

// repliesCall makes a call and describes its reply: the code, then the
// number of entries and of error entries by code.
type repliesCall func(ctx context.Context, c *grpc.ClientConn) (string, error)

func describe(err error, metas []*commonMetadata) string {
	if err != nil {
		return codeOf(err)
	}

	errs := map[codes.Code]int{}
	for _, m := range metas {
		if m.err != "" {
			errs[m.code]++
		}
	}

	if len(errs) == 0 {
		return fmt.Sprintf("OK, %d %s", len(metas), plural(len(metas), "reply", "replies"))
	}

	var parts []string
	for code, n := range errs {
		parts = append(parts, fmt.Sprintf("%d %s %s", n, code, plural(n, "entry", "entries")))
	}

	return "OK, " + strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}

	return many
}

// commonMetadata is what a case reads of a reply entry's common.Metadata.
type commonMetadata struct {
	host string
	err  string
	code codes.Code
}

func metaOf(m *common.Metadata) *commonMetadata {
	//nolint:staticcheck // Error is the field Talos clients read.
	return &commonMetadata{host: m.GetHostname(), err: m.GetError(), code: codes.Code(m.GetStatus().GetCode())}
}

var (
	callRestartReplies repliesCall = func(ctx context.Context, c *grpc.ClientConn) (string, error) {
		resp, err := machine.NewMachineServiceClient(c).ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: noSuchService})

		var metas []*commonMetadata
		for _, m := range resp.GetMessages() {
			metas = append(metas, metaOf(m.GetMetadata()))
		}

		return describe(err, metas), err
	}
	callVersionReplies repliesCall = func(ctx context.Context, c *grpc.ClientConn) (string, error) {
		resp, err := machine.NewMachineServiceClient(c).Version(ctx, &emptypb.Empty{})

		var metas []*commonMetadata
		for _, m := range resp.GetMessages() {
			metas = append(metas, metaOf(m.GetMetadata()))
		}

		return describe(err, metas), err
	}
	callServiceListReplies repliesCall = func(ctx context.Context, c *grpc.ClientConn) (string, error) {
		resp, err := machine.NewMachineServiceClient(c).ServiceList(ctx, &emptypb.Empty{})

		var metas []*commonMetadata
		for _, m := range resp.GetMessages() {
			metas = append(metas, metaOf(m.GetMetadata()))
		}

		return describe(err, metas), err
	}
)

// fanOutCase makes a call as admin (or, with talos-role metadata, as the
// impersonator) and describes its reply entries.
func fanOutCase(name, want string, md []string, c repliesCall) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			id := e.ids.admin
			if len(md) > 0 && md[0] == wire.MetadataRole {
				id = e.ids.impersonator
			}

			conn, err := e.dial(e.Target, id)
			if err != nil {
				r.Problemf("dial: %v", err)

				return "not run"
			}
			defer conn.Close() //nolint:errcheck // one call

			got, _ := c(withMetadata(ctx, e.placeholders(md)...), conn)

			return got
		},
	}
}

// workerCase calls the worker's apid as admin with routing metadata md.
func workerCase(name, want string, md []string) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return codeOf(e.callAs(ctx, e.Worker, e.ids.admin, e.placeholders(md), callRestart))
		},
	}
}
