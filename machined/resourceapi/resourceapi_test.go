package resourceapi_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cosiapi "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/protobuf/client"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	machineconfig "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// serve returns the node state and a COSI client of it over a real gRPC
// connection, as client.COSI of the Talos machinery client is built, for
// a caller with os:reader.
func serve(t *testing.T) (*resourceapi.State, state.State) {
	t.Helper()

	return serveAs(t, role.NewSet(role.Reader))
}

// serveAs is serve for a caller with roles, set in each call's context as
// machined's role injection sets them.
func serveAs(t *testing.T, roles role.Set) (*resourceapi.State, state.State) {
	t.Helper()

	st, err := resourceapi.New()
	if err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(testutil.ShortTempDir(t), "cosi.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(authz.ContextWithRoles(ctx, roles), req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &withRoles{ServerStream: ss, ctx: authz.ContextWithRoles(ss.Context(), roles)})
		}),
	)
	resourceapi.NewServer(st).Register(g)

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return st, state.WrapCore(client.NewAdapter(cosiapi.NewStateClient(conn)))
}

// withRoles is a server stream whose context carries the caller's roles.
type withRoles struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's own context
}

func (w *withRoles) Context() context.Context { return w.ctx }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	return c
}

// TestDefinitionsResolveNamesAndAliases: every served type has a
// definition, and the names talosctl users type find exactly one.
func TestDefinitionsResolveNamesAndAliases(t *testing.T) {
	_, cli := serve(t)

	rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{
		"machinestatus", "services", "svc", "timestatus", "hostname", "hostnamestatus", "nodename",
		"nodeaddresses", "etcdmembers", "certificatestatuses", "certs", "ntpstatus", "mc", "machineconfig", "rd",
		"members", "version", "platformmetadata", "securitystate", "aegisconfig", "upgrade", "upgradestatus",
	} {
		var matched []string

		for rd := range rds.All() {
			for _, a := range append([]string{rd.Metadata().ID()}, rd.TypedSpec().AllAliases...) {
				if strings.EqualFold(a, name) {
					matched = append(matched, rd.Metadata().ID())

					break
				}
			}
		}

		if len(matched) != 1 {
			t.Errorf("%q resolves to %v, want one type", name, matched)
		}

		// talosctl get mc reads Talos's machine config type, as on Talos.
		if name == "mc" && len(matched) == 1 && matched[0] != strings.ToLower(talosconfig.MachineConfigType) {
			t.Errorf("mc resolves to %s, want Talos's type", matched[0])
		}
	}
}

func TestMachineStatusGetListWatch(t *testing.T) {
	st, cli := serve(t)
	c := ctx(t)

	if err := st.SetMachineStatus(machine.MachineStatusEvent_BOOTING, false, []resourceapi.Condition{{Name: "time", Reason: "waiting"}}); err != nil {
		t.Fatal(err)
	}

	ms, err := safe.StateGet[*runtime.MachineStatus](c, cli, runtime.NewMachineStatus().Metadata())
	if err != nil {
		t.Fatal(err)
	}

	if spec := ms.TypedSpec(); spec.Stage != runtime.MachineStageBooting || spec.Status.Ready || len(spec.Status.UnmetConditions) != 1 {
		t.Fatalf("machine status = %+v", spec)
	}

	events := make(chan state.Event, 10)
	if err := cli.Watch(c, runtime.NewMachineStatus().Metadata(), events); err != nil {
		t.Fatal(err)
	}

	if ev := <-events; ev.Type != state.Created {
		t.Fatalf("first event %v, want the current state", ev.Type)
	}

	if err := st.SetMachineStatus(machine.MachineStatusEvent_RUNNING, true, nil); err != nil {
		t.Fatal(err)
	}

	ev := <-events
	if ev.Type != state.Updated {
		t.Fatalf("event %v, want Updated", ev.Type)
	}

	if spec := ev.Resource.(*runtime.MachineStatus).TypedSpec(); spec.Stage != runtime.MachineStageRunning || !spec.Status.Ready {
		t.Fatalf("watched status = %+v", spec)
	}
}

// TestSetServicesRemovesGone: the set follows the node's services.
func TestSetServicesRemovesGone(t *testing.T) {
	st, cli := serve(t)

	for _, svcs := range [][]resourceapi.ServiceState{
		{{ID: "apid", Running: true, Healthy: true}, {ID: "etcd"}},
		{{ID: "apid", Running: true, Healthy: true}},
	} {
		if err := st.SetServices(svcs); err != nil {
			t.Fatal(err)
		}
	}

	list, err := safe.StateListAll[*v1alpha1.Service](ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}

	if list.Len() != 1 || list.Get(0).Metadata().ID() != "apid" || !list.Get(0).TypedSpec().Healthy {
		t.Fatalf("services = %v", list)
	}
}

func TestApplyMembersFollowsTheList(t *testing.T) {
	st, cli := serve(t)

	if err := st.ApplyMembers([]resourceapi.MemberInfo{
		{Hostname: "cp-1", Addresses: []string{"127.5.0.2"}, ControlPlane: true, Version: "v1"},
		{Hostname: "w-1", Addresses: []string{"127.5.0.3"}, Version: "v1"},
	}, nil); err != nil {
		t.Fatal(err)
	}

	if err := st.ApplyMembers(nil, []string{"127.5.0.3", "127.5.0.9"}); err != nil {
		t.Fatal(err)
	}

	list, err := safe.StateListAll[*cluster.Member](ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}

	if list.Len() != 1 {
		t.Fatalf("members = %v, want cp-1 alone (w-1 left the list)", list)
	}

	spec := list.Get(0).TypedSpec()
	if list.Get(0).Metadata().ID() != "cp-1" || spec.MachineType != machineconfig.TypeControlPlane ||
		len(spec.Addresses) != 1 || spec.Addresses[0].String() != "127.5.0.2" || spec.OperatingSystem != "Aegis v1" {
		t.Fatalf("member = %v %+v", list.Get(0).Metadata(), spec)
	}

	if err := st.ApplyMembers([]resourceapi.MemberInfo{{Hostname: "bad", Addresses: []string{"not-an-address"}}}, nil); err == nil {
		t.Fatal("a member with a bad address was set without an error")
	}
}

// TestApplyMembersTwoOfOneName: a hostname two members claim shows the
// member of the lower address, and the other once that one leaves; the
// resource goes when neither holds it.
func TestApplyMembersTwoOfOneName(t *testing.T) {
	st, cli := serve(t)

	shows := func() string {
		t.Helper()

		list, err := safe.StateListAll[*cluster.Member](ctx(t), cli)
		if err != nil {
			t.Fatal(err)
		}

		var out []string
		for m := range list.All() {
			for _, a := range m.TypedSpec().Addresses {
				out = append(out, m.Metadata().ID()+"@"+a.String())
			}
		}

		return strings.Join(out, " ")
	}

	a := resourceapi.MemberInfo{Hostname: "twin", Addresses: []string{"127.5.0.4"}, Version: "v1"}
	b := resourceapi.MemberInfo{Hostname: "twin", Addresses: []string{"127.5.0.3"}, Version: "v1"}

	for _, step := range []struct {
		set     []resourceapi.MemberInfo
		removed []string
		want    string
	}{
		{set: []resourceapi.MemberInfo{a}, want: "twin@127.5.0.4"},
		{set: []resourceapi.MemberInfo{b}, want: "twin@127.5.0.3"},
		{removed: []string{"127.5.0.3"}, want: "twin@127.5.0.4"},
		{removed: []string{"127.5.0.4"}, want: ""},
	} {
		if err := st.ApplyMembers(step.set, step.removed); err != nil {
			t.Fatal(err)
		}

		if got := shows(); got != step.want {
			t.Fatalf("after set %v, removed %v: %q, want %q", step.set, step.removed, got, step.want)
		}
	}
}

func TestClientsCannotWrite(t *testing.T) {
	_, cli := serve(t)
	c := ctx(t)

	svc := v1alpha1.NewService("evil")
	for name, err := range map[string]error{
		"create":  cli.Create(c, svc),
		"update":  cli.Update(c, svc),
		"destroy": cli.Destroy(c, runtime.NewMachineStatus().Metadata()),
	} {
		// The COSI client turns PermissionDenied into an owner conflict.
		if !state.IsOwnerConflictError(err) || !strings.Contains(err.Error(), "PermissionDenied") || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s: err = %v, want PermissionDenied saying read-only", name, err)
		}
	}
}

// TestCertificatesNeverCarryKeys: the statuses hold what a certificate
// shows, the issuer's fingerprint, and nothing of a key handed with it.
func TestCertificatesNeverCarryKeys(t *testing.T) {
	st, cli := serve(t)
	now := time.Now()
	osCA := catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))
	issued := catest.Issue(t, catest.NewIssuer(t, osCA, now), catest.Key(t, ca.Ed25519), ca.ProfileServer, time.Hour)

	withKey := append(append([]byte{}, issued.PEM...), osCA.KeyPEM...)
	if err := st.SetCertificates([]resourceapi.Certificate{{ID: "server", Kind: resourcetypes.CertKindServer, PEM: withKey}}, osCA.CertPEM); err != nil {
		t.Fatal(err)
	}

	list, err := safe.StateListAll[*resourcetypes.CertificateStatus](ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}

	if list.Len() != 2 {
		t.Fatalf("%d statuses, want the server certificate and the CA", list.Len())
	}

	for r := range list.All() {
		spec := r.TypedSpec()
		if spec.IssuerFingerprint == "" || spec.NotAfter.IsZero() {
			t.Errorf("%s: %+v", r.Metadata().ID(), spec)
		}

		out, _ := resource.MarshalYAML(r)
		if b, _ := yamlString(out); strings.Contains(b, "PRIVATE") || strings.Contains(b, string(osCA.KeyPEM[40:60])) {
			t.Errorf("%s carries key material", r.Metadata().ID())
		}
	}
}

// TestApplyMembersWritesWhatChanged: a member whose resource would not
// change is not written again; one that changed is, and one that left is
// destroyed.
func TestApplyMembersWritesWhatChanged(t *testing.T) {
	st, cli := serve(t)

	versions := func() map[string]string {
		t.Helper()

		list, err := safe.StateListAll[*cluster.Member](ctx(t), cli)
		if err != nil {
			t.Fatal(err)
		}

		out := map[string]string{}
		for m := range list.All() {
			out[m.Metadata().ID()] = m.Metadata().Version().String()
		}

		return out
	}

	cp := resourceapi.MemberInfo{Hostname: "cp-1", Addresses: []string{"127.5.0.2"}, ControlPlane: true, Version: "v1"}
	w := resourceapi.MemberInfo{Hostname: "w-1", Addresses: []string{"127.5.0.3"}, Version: "v1"}

	if err := st.ApplyMembers([]resourceapi.MemberInfo{cp, w}, nil); err != nil {
		t.Fatal(err)
	}

	before := versions()

	w2 := w
	w2.Version = "v2"

	if err := st.ApplyMembers([]resourceapi.MemberInfo{cp, w2}, nil); err != nil {
		t.Fatal(err)
	}

	after := versions()
	if after["cp-1"] != before["cp-1"] || after["w-1"] == before["w-1"] {
		t.Fatalf("resource versions %v then %v: want cp-1 untouched and w-1 written", before, after)
	}

	if err := st.ApplyMembers(nil, []string{"127.5.0.3"}); err != nil {
		t.Fatal(err)
	}

	if left := versions(); len(left) != 1 || left["cp-1"] != before["cp-1"] {
		t.Fatalf("after w-1 left: %v", left)
	}
}
