package resourceapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
)

// testConfigs returns a control plane's and a worker's config of one bundle.
func testConfigs(t *testing.T) (cp, worker *certs.MachineConfig) {
	t.Helper()

	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	opts := certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.5.0.2", TrustHostClock: true, Hostname: "cp-1", CertSANs: []string{"demo.example"}}

	cp, err = certs.GenerateMachineConfig(b, certs.NodeControlPlane, opts, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	opts.Hostname = "w-1"

	worker, err = certs.GenerateMachineConfig(b, certs.NodeWorker, opts, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	return cp, worker
}

// TestTalosMachineConfigByRole: Talos's machine config type is sensitive,
// so os:admin alone reads it, as in Talos; what the admin reads is a
// Talos config Talos's loader parses, with no key and no token in it.
func TestTalosMachineConfigByRole(t *testing.T) {
	cp, _ := testConfigs(t)

	for _, tc := range []struct {
		name  string
		roles role.Set
		ok    bool
	}{
		{"reader", role.NewSet(role.Reader), false},
		{"operator", role.NewSet(role.Operator), false},
		{"etcd backup", role.NewSet(role.EtcdBackup), false},
		{"no role", role.NewSet(), false},
		{"admin", role.NewSet(role.Admin), true},
		{"operator and admin", role.NewSet(role.Operator, role.Admin), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, cli := serveAs(t, tc.roles)
			if err := st.SetMachineConfig(cp); err != nil {
				t.Fatal(err)
			}

			mc, err := safe.StateGetByID[*talosconfig.MachineConfig](ctx(t), cli, talosconfig.ActiveID)
			if !tc.ok {
				if !isCode(err, codes.PermissionDenied) || !strings.Contains(err.Error(), "sensitive") {
					t.Fatalf("err = %v, want PermissionDenied saying the type is sensitive", err)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			checkTalosView(t, mc, cp)
		})
	}
}

func checkTalosView(t *testing.T, mc *talosconfig.MachineConfig, cfg *certs.MachineConfig) {
	t.Helper()

	doc, err := mc.Container().Bytes()
	if err != nil {
		t.Fatal(err)
	}

	for _, secret := range []string{cfg.Machine.Token, string(cfg.Machine.CA.Key), string(cfg.Cluster.Etcd.CA.Key), "PRIVATE KEY"} {
		if strings.Contains(string(doc), secret) {
			t.Errorf("the Talos view holds a secret (%.12s…):\n%s", secret, doc)
		}
	}

	p := mc.Provider()
	if raw := p.RawV1Alpha1(); p.Machine().Type().String() != "controlplane" || p.Cluster().Name() != "demo" || raw.MachineConfig.MachineNetwork.NetworkHostname != "cp-1" {
		t.Errorf("type %s, cluster %q, hostname %+v", p.Machine().Type(), p.Cluster().Name(), raw.MachineConfig.MachineNetwork)
	}

	if p.Cluster().Discovery().Enabled() {
		t.Error("cluster discovery is on: an Aegis node runs none of Talos's")
	}

	if ca := p.Machine().Security().IssuingCA(); ca == nil || string(ca.Crt) != string(cfg.Machine.CA.Crt) || string(ca.Key) != "******" {
		t.Errorf("machine CA %+v, want the OS CA's certificate, its key redacted", ca)
	}

	if tok := p.Machine().Security().Token(); tok != "******" {
		t.Errorf("token %q, want it redacted", tok)
	}
}

// TestAegisMachineConfigStaysReadable: Aegis's own redacted config is read
// by readers and is no longer named mc, which is Talos's type.
func TestAegisMachineConfigStaysReadable(t *testing.T) {
	st, cli := serve(t)
	cp, _ := testConfigs(t)

	if err := st.SetMachineConfig(cp); err != nil {
		t.Fatal(err)
	}

	mc, err := safe.StateGet[*resourcetypes.MachineConfig](ctx(t), cli, resourcetypes.NewMachineConfig().Metadata())
	if err != nil {
		t.Fatal(err)
	}

	if doc := mc.TypedSpec().Document; strings.Contains(doc, cp.Machine.Token) || !strings.Contains(doc, "trustHostClock") {
		t.Errorf("Aegis config:\n%s", doc)
	}
}

// TestWhatIsNotServedAnswersAtOnce: a read of a type or namespace the node
// does not serve is answered, by Get, List and Watch alike, never left
// waiting; Talos's secrets are refused naming the Aegis command.
func TestWhatIsNotServedAnswersAtOnce(t *testing.T) {
	_, admin := serveAs(t, role.NewSet(role.Admin))

	for _, tc := range []struct {
		name string
		md   resource.Metadata
		code codes.Code
		says []string
	}{
		{"no type", resource.NewMetadata("runtime", "", "x", resource.VersionUndefined),
			codes.InvalidArgument, []string{"no resource type given"}},
		{"unknown type", resource.NewMetadata("block", "Disks.block.talos.dev", "sda", resource.VersionUndefined),
			codes.Unimplemented, []string{`"Disks.block.talos.dev" is not served`}},
		{"served type, unknown namespace", resource.NewMetadata("nosuch", v1alpha1.ServiceType, "apid", resource.VersionUndefined),
			codes.Unimplemented, []string{`namespace "nosuch" is not served`}},
		{"OS root secrets", resource.NewMetadata(secrets.NamespaceName, secrets.OSRootType, secrets.OSRootID, resource.VersionUndefined),
			codes.PermissionDenied, []string{"OSRootSecrets.secrets.talos.dev", "no secrets", "`aegisctl rotate-ca`"}},
		{"etcd root secrets", resource.NewMetadata(secrets.NamespaceName, secrets.EtcdRootType, secrets.EtcdRootID, resource.VersionUndefined),
			codes.PermissionDenied, []string{"`aegisctl rotate-ca --ca etcd`"}},
		{"other secrets", resource.NewMetadata(secrets.NamespaceName, secrets.APIType, secrets.APIID, resource.VersionUndefined),
			codes.PermissionDenied, []string{"no secrets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
			defer cancel()

			_, getErr := admin.Get(c, tc.md)
			_, listErr := admin.List(c, resource.NewMetadata(tc.md.Namespace(), tc.md.Type(), "", resource.VersionUndefined))
			watchErr := admin.Watch(c, tc.md, make(chan state.Event))
			kindErr := admin.WatchKind(c, resource.NewMetadata(tc.md.Namespace(), tc.md.Type(), "", resource.VersionUndefined), make(chan state.Event))

			for verb, err := range map[string]error{"get": getErr, "list": listErr, "watch": watchErr, "watch kind": kindErr} {
				if !isCode(err, tc.code) {
					t.Errorf("%s: err = %v, want %s", verb, err, tc.code)

					continue
				}

				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s: %v does not say %q", verb, err, s)
					}
				}
			}
		})
	}
}

// TestSecurityStateWatchAnswers: the watch Talos's test suite starts with
// (SecurityState, created or updated) returns the node's state.
func TestSecurityStateWatchAnswers(t *testing.T) {
	st, cli := serve(t)

	want := runtime.SecurityStateSpec{SELinuxState: runtime.SELinuxStatePermissive, ModuleSignatureEnforced: true}
	if err := st.SetSecurityState(want); err != nil {
		t.Fatal(err)
	}

	c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()

	got, err := safe.StateWatchFor[*runtime.SecurityState](c, cli, runtime.NewSecurityStateSpec(runtime.NamespaceName).Metadata(),
		state.WithEventTypes(state.Created, state.Updated))
	if err != nil {
		t.Fatal(err)
	}

	if *got.TypedSpec() != want {
		t.Errorf("security state %+v, want %+v", got.TypedSpec(), want)
	}
}

func isCode(err error, code codes.Code) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok && s.Code() == code {
			return true
		}
	}

	return false
}
