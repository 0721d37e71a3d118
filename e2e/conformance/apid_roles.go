package conformance

import (
	"context"
	"errors"
	"io"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz/role"
)

// call is one API call a case makes; it returns the call's error.
type call func(ctx context.Context, conn *grpc.ClientConn) error

// codeOf names the outcome of a call by its gRPC code.
func codeOf(err error) string { return status.Code(err).String() }

// firstRecv opens a server stream and reads its first message: a stream is
// authorized when it opens, and the refusal arrives with the first read.
// A stream that ends cleanly at once counts as OK.
func firstRecv[T any](s interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}

	if _, err = s.Recv(); errors.Is(err, io.EOF) {
		return nil
	}

	return err
}

// noSuchService names a service no node has: an allowed restart of it
// reaches machined and changes nothing.
const noSuchService = "conformance-no-such-service"

// noSuchNode names a node the cluster never had: an allowed removal of it
// reaches machined and changes nothing.
const noSuchNode = "conformance-no-such-node"

// Calls of every method class the roles are tried against.
var (
	callServiceList call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).ServiceList(ctx, &emptypb.Empty{})

		return err
	}
	callLogs call = func(ctx context.Context, c *grpc.ClientConn) error {
		return firstRecv(machine.NewMachineServiceClient(c).Logs(ctx, &machine.LogsRequest{Id: "apid", TailLines: 1}))
	}
	callEvents call = func(ctx context.Context, c *grpc.ClientConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		return firstRecv(machine.NewMachineServiceClient(c).Events(ctx, &machine.EventsRequest{}))
	}
	callRestart call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: noSuchService})

		return err
	}
	callEtcdSnapshot call = func(ctx context.Context, c *grpc.ClientConn) error {
		return firstRecv(machine.NewMachineServiceClient(c).EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{}))
	}
	callClientConfig call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).GenerateClientConfiguration(ctx,
			&machine.GenerateClientConfigurationRequest{Roles: []string{"os:conformance-no-such-role"}})

		return err
	}
	callRead call = func(ctx context.Context, c *grpc.ClientConn) error {
		return firstRecv(machine.NewMachineServiceClient(c).Read(ctx, &machine.ReadRequest{Path: "/proc/sys/kernel/random/boot_id"}))
	}
	callTokenList call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := tokens.NewTokenServiceClient(c).List(ctx, &tokens.ListRequest{})

		return err
	}
	callCertified call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := membership.NewMembershipServiceClient(c).Certified(ctx, &membership.CertifiedRequest{})

		return err
	}
	callRemove call = func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := membership.NewMembershipServiceClient(c).Remove(ctx, &membership.RemoveRequest{Node: noSuchNode})

		return err
	}
	callNoRule call = func(ctx context.Context, c *grpc.ClientConn) error {
		return c.Invoke(ctx, "/machine.MachineService/ConformanceNoSuchMethod", &emptypb.Empty{}, &emptypb.Empty{})
	}
)

// methodClass is a kind of method, the roles it allows and what an allowed
// call answers (a request chosen so that an allowed call changes nothing).
type methodClass struct {
	name    string
	call    call
	allowed []role.Role
	answer  codes.Code
}

func methodClasses() []methodClass {
	all := []role.Role{role.Admin, role.Operator, role.Reader, role.EtcdBackup}

	return []methodClass{
		{"read: ServiceList", callServiceList, all, codes.OK},
		{"read stream: Logs", callLogs, all, codes.OK},
		{"read stream: Events", callEvents, all, codes.OK},
		{"operate: ServiceRestart of an unknown service", callRestart, []role.Role{role.Admin, role.Operator}, codes.NotFound},
		{"etcd backup stream: EtcdSnapshot", callEtcdSnapshot, []role.Role{role.Admin, role.Operator, role.EtcdBackup}, codes.OK},
		{"admin: GenerateClientConfiguration with an unknown role", callClientConfig, []role.Role{role.Admin}, codes.InvalidArgument},
		{"admin stream: Read of the boot ID", callRead, []role.Role{role.Admin}, codes.OK},
		{"admin: TokenService.List", callTokenList, []role.Role{role.Admin}, codes.OK},
		{"read: MembershipService.Certified", callCertified, all, codes.OK},
		{"admin: MembershipService.Remove of an unknown node", callRemove, []role.Role{role.Admin}, codes.NotFound},
		{"method without a rule", callNoRule, []role.Role{role.Admin}, codes.Unimplemented},
	}
}

// roleCases try each role against each method class on the target.
func roleCases() []*Case {
	holders := []struct {
		role role.Role
		pick func(*identities) Identity
	}{
		{role.Admin, func(i *identities) Identity { return i.admin }},
		{role.Operator, func(i *identities) Identity { return i.operator }},
		{role.Reader, func(i *identities) Identity { return i.reader }},
		{role.EtcdBackup, func(i *identities) Identity { return i.etcdBackup }},
	}

	var out []*Case

	for _, h := range holders {
		for _, mc := range methodClasses() {
			want := codes.PermissionDenied
			for _, r := range mc.allowed {
				if r == h.role {
					want = mc.answer
				}
			}

			out = append(out, callCase(string(h.role)+" × "+mc.name, want.String(), h.pick, nil, mc.call))
		}
	}

	return out
}

// callCase is a case that makes one call on the target as the identity
// pick chooses, with outgoing metadata md (key, value pairs), and expects
// its code.
func callCase(name, want string, pick func(*identities) Identity, md []string, c call) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return codeOf(e.callAs(ctx, e.Target, pick(e.ids), e.placeholders(md), c))
		},
	}
}

// callAs makes c on node's apid as id, with outgoing metadata md.
func (e *Env) callAs(ctx context.Context, node string, id Identity, md []string, c call) error {
	conn, err := e.dial(node, id)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // one call

	return c(withMetadata(ctx, md...), conn)
}
