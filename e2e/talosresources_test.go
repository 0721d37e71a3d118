package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/machined/localcluster"
)

// checkTalosResources reads through the control plane what Talos's own API
// tests read of n: the version resource against the Version API, the
// platform, the security state by the watch the suite starts with, Talos's
// machine config (os:admin only, a Talos config, no secret), and what is
// refused: Talos's CA secrets (naming aegisctl rotate-ca, as talosctl
// rotate-ca reads them first) and a type the node does not serve, both at
// once.
func checkTalosResources(t *testing.T, reader, admin *client.Client, n localcluster.Node) {
	t.Helper()

	ctx := client.WithNode(etcdCtx(t), n.Address)

	ver, err := reader.Version(ctx)
	if err != nil {
		t.Fatalf("%s: Version: %v", n.Name, err)
	}

	m := ver.GetMessages()[0]

	v, err := safe.StateGetByID[*runtime.Version](ctx, reader.COSI, "version")
	if err != nil || v.TypedSpec().Version != m.GetVersion().GetTag() {
		t.Errorf("%s: version resource %v, %v; Version answers %s", n.Name, v, err, m.GetVersion().GetTag())
	}

	pm, err := safe.StateGetByID[*runtime.PlatformMetadata](ctx, reader.COSI, runtime.PlatformMetadataID)
	if err != nil || pm.TypedSpec().Platform != m.GetPlatform().GetName() || pm.TypedSpec().Hostname != n.Name {
		t.Errorf("%s: platform metadata %v, %v; Version's platform %s", n.Name, pm, err, m.GetPlatform().GetName())
	}

	watchCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	ss, err := safe.StateWatchFor[*runtime.SecurityState](watchCtx, reader.COSI,
		runtime.NewSecurityStateSpec(runtime.NamespaceName).Metadata(), state.WithEventTypes(state.Created, state.Updated))
	if err != nil || ss.TypedSpec().SecureBoot {
		t.Errorf("%s: security state %v, %v", n.Name, ss, err)
	}

	checkTalosMachineConfig(t, ctx, reader, admin, n)

	osRoot := resource.NewMetadata(secrets.NamespaceName, secrets.OSRootType, secrets.OSRootID, resource.VersionUndefined)
	if _, err = admin.COSI.Get(ctx, osRoot); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "aegisctl rotate-ca") {
		t.Errorf("%s: OSRootSecrets: %v, want PermissionDenied naming aegisctl rotate-ca", n.Name, err)
	}

	disks := resource.NewMetadata("block", "Disks.block.talos.dev", "", resource.VersionUndefined)
	if err = admin.COSI.WatchKind(watchCtx, disks, make(chan state.Event)); status.Code(err) != codes.Unimplemented {
		t.Errorf("%s: watch of a type not served: %v, want Unimplemented at once", n.Name, err)
	}
}

func checkTalosMachineConfig(t *testing.T, ctx context.Context, reader, admin *client.Client, n localcluster.Node) { //nolint:revive // ctx carries the node
	t.Helper()

	if _, err := safe.StateGetByID[*talosconfig.MachineConfig](ctx, reader.COSI, talosconfig.ActiveID); status.Code(err) != codes.PermissionDenied {
		t.Errorf("%s: a reader's Talos machine config: %v, want PermissionDenied as in Talos", n.Name, err)
	}

	mc, err := safe.StateGetByID[*talosconfig.MachineConfig](ctx, admin.COSI, talosconfig.ActiveID)
	if err != nil {
		t.Fatalf("%s: Talos machine config: %v", n.Name, err)
	}

	p := mc.Provider()
	if p.Machine().Type().IsControlPlane() != n.Type.IsControlPlane() || p.Cluster().Discovery().Enabled() ||
		p.Machine().Security().Token() != "******" {
		t.Errorf("%s: Talos machine config: type %s, discovery %v, token %q", n.Name, p.Machine().Type(), p.Cluster().Discovery().Enabled(), p.Machine().Security().Token())
	}

	wantKey := ""
	if n.Type.IsControlPlane() {
		wantKey = "******"
	}

	if ca := p.Machine().Security().IssuingCA(); ca == nil || string(ca.Key) != wantKey || len(ca.Crt) == 0 {
		t.Errorf("%s: Talos machine config's CA %+v, want the certificate and key %q", n.Name, ca, wantKey)
	}
}
