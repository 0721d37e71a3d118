package rollout

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/client/cluster"
)

// fakeMembership answers List with its members and Certified with its
// certified nodes (nil: every member), as one node.
type fakeMembership struct {
	membership.UnimplementedMembershipServiceServer

	members   []*membership.Member
	certified []*membership.CertifiedNode
}

func (f *fakeMembership) List(context.Context, *membership.ListRequest) (*membership.ListResponse, error) {
	return &membership.ListResponse{Messages: []*membership.Members{{Members: f.members}}}, nil
}

func (f *fakeMembership) Certified(context.Context, *membership.CertifiedRequest) (*membership.CertifiedResponse, error) {
	nodes := f.certified
	if nodes == nil {
		for _, m := range f.members {
			nodes = append(nodes, &membership.CertifiedNode{Hostname: m.GetHostname(), Addresses: m.GetAddresses(), Role: m.GetRole()})
		}
	}

	return &membership.CertifiedResponse{Messages: []*membership.CertifiedNodes{{Nodes: nodes}}}, nil
}

// listOnly serves List but not Certified, as a control plane of an older
// Aegis does.
type listOnly struct {
	membership.UnimplementedMembershipServiceServer

	list *fakeMembership
}

func (l listOnly) List(ctx context.Context, req *membership.ListRequest) (*membership.ListResponse, error) {
	return l.list.List(ctx, req)
}

// walkerOf serves srv on a Unix socket and returns a Walker calling it.
func walkerOf(t *testing.T, srv membership.MembershipServiceServer) *Walker {
	t.Helper()

	path := filepath.Join(t.TempDir(), "api.sock")

	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}

	s := grpc.NewServer()
	membership.RegisterMembershipServiceServer(s, srv)

	go s.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(s.Stop)

	c, err := client.New(t.Context(), client.WithUnixSocket(path),
		client.WithGRPCDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck // test cleanup

	return New(Options{Client: c})
}

// TestMembers: control planes first, each group by address; a member
// without an address, or already known, is left out.
func TestMembers(t *testing.T) {
	w := walkerOf(t, &fakeMembership{members: []*membership.Member{
		{Hostname: "w-1", Addresses: []string{"10.0.0.9"}, Role: "worker"},
		{Hostname: "cp-2", Addresses: []string{"10.0.0.3", "fd00::3"}, Role: "controlplane"},
		{Hostname: "w-0", Addresses: []string{"10.0.0.5"}, Role: "worker"},
		{Hostname: "cp-1", Addresses: []string{"10.0.0.2"}, Role: "init"},
		{Hostname: "ghost", Role: "worker"},
	}})

	got, err := w.Members(t.Context(), []Member{{Name: "w-1", Addr: "10.0.0.9"}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, m := range got {
		names = append(names, m.String())
	}

	want := []string{"cp-1 (10.0.0.2)", "cp-2 (10.0.0.3)", "w-0 (10.0.0.5)"}
	if !slices.Equal(names, want) {
		t.Fatalf("members %v, want %v", names, want)
	}

	if !slices.Equal(got[1].Addrs, []string{"10.0.0.3", "fd00::3"}) || got[2].ControlPlane() || !got[0].ControlPlane() {
		t.Fatalf("members read wrongly: %+v", got)
	}
}

// TestMembersRefused: a list the endpoint refuses is an error saying the
// endpoint must be a control plane.
func TestMembersRefused(t *testing.T) {
	w := walkerOf(t, membership.UnimplementedMembershipServiceServer{})

	if _, err := w.Members(t.Context(), nil, nil); err == nil || !strings.Contains(err.Error(), "the endpoint must be a control plane") {
		t.Fatalf("err = %v", err)
	}
}

// TestMembersMissing: a node that holds a live certificate of the cluster
// but is not in the member list stops the procedure, named, unless the
// procedure does not concern it; an endpoint that cannot say which nodes
// hold certificates stops it too.
func TestMembersMissing(t *testing.T) {
	cp := &membership.Member{Hostname: "cp-1", Addresses: []string{"10.0.0.2"}, Role: "controlplane"}
	w0 := &membership.Member{Hostname: "w-0", Addresses: []string{"10.0.0.5"}, Role: "worker"}
	certified := func(extra ...*membership.CertifiedNode) []*membership.CertifiedNode {
		return append([]*membership.CertifiedNode{
			{Hostname: "cp-1", Addresses: []string{"10.0.0.2"}, Role: "controlplane"},
			{Hostname: "w-0", Addresses: []string{"10.0.0.5"}, Role: "worker"},
		}, extra...)
	}
	goneWorker := &membership.CertifiedNode{Hostname: "w-1", Addresses: []string{"10.0.0.6"}, Role: "worker"}
	goneCP := &membership.CertifiedNode{Hostname: "cp-2", Addresses: []string{"10.0.0.3"}, Role: "controlplane"}
	controlPlanes := func(m Member) bool { return m.ControlPlane() }

	for _, tc := range []struct {
		name     string
		srv      membership.MembershipServiceServer
		concerns func(Member) bool
		want     error
		named    string
	}{
		{name: "all certified are members", srv: &fakeMembership{members: []*membership.Member{cp, w0}, certified: certified()}},
		{name: "a gone worker", srv: &fakeMembership{members: []*membership.Member{cp, w0}, certified: certified(goneWorker)},
			want: cluster.ErrMissing, named: "aegisctl members remove w-1"},
		{name: "a gone worker, control planes only", srv: &fakeMembership{members: []*membership.Member{cp, w0}, certified: certified(goneWorker)},
			concerns: controlPlanes},
		{name: "a gone control plane, control planes only", srv: &fakeMembership{members: []*membership.Member{cp, w0}, certified: certified(goneWorker, goneCP)},
			concerns: controlPlanes, want: cluster.ErrMissing, named: "control plane cp-2 (10.0.0.3)"},
		{name: "no certified nodes", srv: &fakeMembership{members: []*membership.Member{cp, w0}, certified: []*membership.CertifiedNode{}},
			concerns: controlPlanes, want: cluster.ErrUnknown},
		{name: "an older control plane", srv: listOnly{list: &fakeMembership{members: []*membership.Member{cp, w0}}},
			want: cluster.ErrUnknown, named: "upgrade the control planes first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := walkerOf(t, tc.srv).Members(t.Context(), nil, tc.concerns)
			if tc.want == nil {
				if err != nil || len(got) != 2 {
					t.Fatalf("Members = %v, %v; want the two members", got, err)
				}

				return
			}

			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.named) {
				t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.named)
			}

			if tc.name == "a gone control plane, control planes only" && strings.Contains(err.Error(), "w-1") {
				t.Fatalf("err = %v names a worker the procedure does not concern", err)
			}
		})
	}
}

// TestDefaultReply: a node's error in a reply's metadata is the call's.
func TestDefaultReply(t *testing.T) {
	ok := &machine.VersionResponse{Messages: []*machine.Version{{Metadata: &common.Metadata{Hostname: "a"}}}}
	if err := defaultReply(ok, nil); err != nil {
		t.Fatal(err)
	}

	failed := &machine.VersionResponse{Messages: []*machine.Version{
		{Metadata: &common.Metadata{Hostname: "a"}},
		{Metadata: &common.Metadata{Hostname: "b", Error: "down"}},
	}}
	if err := defaultReply(failed, nil); err == nil || err.Error() != "b: down" {
		t.Fatalf("err = %v, want b: down", err)
	}

	callErr := errors.New("refused")
	if err := defaultReply(nil, callErr); !errors.Is(err, callErr) {
		t.Fatalf("err = %v, want the call's", err)
	}
}

func TestMemberString(t *testing.T) {
	for m, want := range map[*Member]string{
		{Name: "cp-1", Addr: "10.0.0.2"}:     "cp-1 (10.0.0.2)",
		{Addr: "10.0.0.2"}:                   "10.0.0.2",
		{Name: "10.0.0.2", Addr: "10.0.0.2"}: "10.0.0.2",
	} {
		if got := m.String(); got != want {
			t.Errorf("%+v is %q, want %q", *m, got, want)
		}
	}
}
