package resourceapi_test

import (
	"crypto/fips140"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// TestVersionAndPlatform: Versions/version holds the tag given (what the
// Version API answers), PlatformMetadatas/platformmetadata the platform and
// the hostname, whichever of the two setters comes first.
func TestVersionAndPlatform(t *testing.T) {
	for _, tc := range []struct {
		name          string
		identityFirst bool
	}{{"version first", false}, {"identity first", true}} {
		t.Run(tc.name, func(t *testing.T) {
			st, cli := serve(t)

			steps := []func() error{
				func() error { return st.SetVersion("v1.11.5-aegis.0.1.0", "aegis") },
				func() error { return st.SetIdentity("cp-1", []string{"127.5.0.2"}) },
			}
			if tc.identityFirst {
				steps[0], steps[1] = steps[1], steps[0]
			}

			for _, step := range steps {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}

			v, err := safe.StateGetByID[*runtime.Version](ctx(t), cli, "version")
			if err != nil || v.TypedSpec().Version != "v1.11.5-aegis.0.1.0" || v.TypedSpec().Name != resourceapi.ProductName {
				t.Fatalf("version %v, %v", v, err)
			}

			pm, err := safe.StateGetByID[*runtime.PlatformMetadata](ctx(t), cli, runtime.PlatformMetadataID)
			if err != nil || pm.TypedSpec().Platform != "aegis" || pm.TypedSpec().Hostname != "cp-1" {
				t.Fatalf("platform metadata %v, %v", pm, err)
			}
		})
	}
}

func TestReadSecurityState(t *testing.T) {
	fips := runtime.FIPSStateDisabled

	switch {
	case fips140.Enforced():
		fips = runtime.FIPSStateStrict
	case fips140.Enabled():
		fips = runtime.FIPSStateEnabled
	}

	for _, tc := range []struct {
		name string
		host fstest.MapFS
		want runtime.SecurityStateSpec
	}{
		{"nothing known", fstest.MapFS{}, runtime.SecurityStateSpec{}},
		{"selinux enforcing, signatures enforced", fstest.MapFS{
			"sys/fs/selinux/enforce":                   {Data: []byte("1\n")},
			"sys/module/module/parameters/sig_enforce": {Data: []byte("Y\n")},
		}, runtime.SecurityStateSpec{SELinuxState: runtime.SELinuxStateEnforcing, ModuleSignatureEnforced: true}},
		{"selinux permissive, signatures not enforced", fstest.MapFS{
			"sys/fs/selinux/enforce":                   {Data: []byte("0\n")},
			"sys/module/module/parameters/sig_enforce": {Data: []byte("N\n")},
		}, runtime.SecurityStateSpec{SELinuxState: runtime.SELinuxStatePermissive}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.FIPSState = fips

			// Never secure boot, a UKI or signing keys: Aegis boots nothing.
			if got := resourceapi.ReadSecurityState(tc.host); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTalosViewOfAWorker: a worker's view has the OS CA's certificate and
// no key, no etcd CA, and is set again only when it changes.
func TestTalosViewOfAWorker(t *testing.T) {
	st, cli := serveAs(t, role.NewSet(role.Admin))
	_, worker := testConfigs(t)

	for range 2 {
		if err := st.SetMachineConfig(worker); err != nil {
			t.Fatal(err)
		}
	}

	mc, err := safe.StateGetByID[*talosconfig.MachineConfig](ctx(t), cli, talosconfig.ActiveID)
	if err != nil {
		t.Fatal(err)
	}

	p := mc.Provider()
	if ca := p.Machine().Security().IssuingCA(); p.Machine().Type().String() != "worker" || ca == nil || len(ca.Key) != 0 || len(ca.Crt) == 0 {
		t.Errorf("type %s, CA %+v", p.Machine().Type(), ca)
	}

	if p.Cluster().Etcd().CA() != nil {
		t.Errorf("a worker's view has an etcd CA")
	}

	if v := mc.Metadata().Version().Value(); v != 1 {
		t.Errorf("version %d after setting the same config twice, want 1", v)
	}
}

// TestTalosViewFollowsLiveChanges: a changed config (a live apply) is a new
// version of the view, which a watcher sees.
func TestTalosViewFollowsLiveChanges(t *testing.T) {
	st, cli := serveAs(t, role.NewSet(role.Admin))
	_, worker := testConfigs(t)

	if err := st.SetMachineConfig(worker); err != nil {
		t.Fatal(err)
	}

	worker.Machine.CertSANs = append(worker.Machine.CertSANs, "new.example")
	if err := st.SetMachineConfig(worker); err != nil {
		t.Fatal(err)
	}

	mc, err := safe.StateGetByID[*talosconfig.MachineConfig](ctx(t), cli, talosconfig.ActiveID)
	if err != nil {
		t.Fatal(err)
	}

	if sans := mc.Provider().Machine().Security().CertSANs(); mc.Metadata().Version().Value() != 2 || !slices.Contains(sans, "new.example") {
		t.Errorf("version %d, SANs %v; want version 2 with new.example", mc.Metadata().Version().Value(), sans)
	}
}

// TestUpgradeStatusReadable: the node's installed versions reach a reader
// over the wire whole, the trial's times and the last rollback included,
// and a client that imports the types decodes them typed.
func TestUpgradeStatusReadable(t *testing.T) {
	st, cli := serveAs(t, role.NewSet(role.Reader))
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	want := resourcetypes.UpgradeStatusSpec{
		ActiveSlot: "b", ActiveVersion: "v0.3.0", PreviousVersion: "v0.2.0", StagedVersion: "v0.3.1",
		OnTrial: true, TrialSince: at, TrialDeadline: at.Add(time.Minute), TrialStarts: 2,
		LastRollback: resourcetypes.UpgradeRollback{At: at.Add(-time.Hour), From: "v0.3.0", To: "v0.2.0", Reason: "v0.3.0 was not healthy within 1m0s", ByNode: true},
	}

	if err := st.SetUpgradeStatus(want); err != nil {
		t.Fatal(err)
	}

	got, err := safe.StateGetByID[*resourcetypes.UpgradeStatus](ctx(t), cli, resourcetypes.UpgradeStatusID)
	if err != nil {
		t.Fatal(err)
	}

	spec := *got.TypedSpec()
	if !spec.TrialSince.Equal(want.TrialSince) || !spec.TrialDeadline.Equal(want.TrialDeadline) || !spec.LastRollback.At.Equal(want.LastRollback.At) {
		t.Fatalf("times %v %v %v, want %v %v %v", spec.TrialSince, spec.TrialDeadline, spec.LastRollback.At,
			want.TrialSince, want.TrialDeadline, want.LastRollback.At)
	}

	spec.TrialSince, spec.TrialDeadline, spec.LastRollback.At = want.TrialSince, want.TrialDeadline, want.LastRollback.At
	if spec != want {
		t.Fatalf("read\n%+v\nwant\n%+v", spec, want)
	}
}
