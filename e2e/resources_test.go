package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// TestResourceAPI reads every resource of a 1+2 cluster with the Talos
// machinery client (client.COSI, as talosctl get does: one `node` per
// call), as a reader, through the control plane's apid (Talos's machine
// config as admin, refused to the reader, and what is not served, refused
// at once, as Talos's API tests and talosctl rotate-ca read them); watches the
// machine status through a service restart; and checks Time, Processes,
// Dmesg and Rollback.
func TestResourceAPI(t *testing.T) {
	c := etcdCluster(t, "res", "127.9.18.0/24", 1, 2, false)
	admin := talosClient(t, c.ClientConfigPath())
	cp := c.ControlPlanes()[0]
	reader := roleClient(t, admin, cp.Address, "os:reader")

	t.Run("get rd resolves names and aliases on every node", func(t *testing.T) {
		for _, n := range c.Nodes {
			ctx := client.WithNode(etcdCtx(t), n.Address)

			rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, reader.COSI)
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}

			if rds.Len() < 10 {
				t.Errorf("%s: %d definitions", n.Name, rds.Len())
			}

			for name, want := range map[string]resource.Type{
				"machinestatus": runtime.MachineStatusType, "svc": v1alpha1.ServiceType, "timestatus": timeres.StatusType,
				"hostname": network.HostnameStatusType, "nodename": k8s.NodenameType, "nodeaddresses": network.NodeAddressType,
				"etcdmembers": etcd.MemberType, "certs": resourcetypes.CertificateStatusType, "ntpstatus": resourcetypes.NTPStatusType,
				"mc": talosconfig.MachineConfigType, "aegisconfig": resourcetypes.MachineConfigType, "rd": meta.ResourceDefinitionType,
				"version": runtime.VersionType, "securitystate": runtime.SecurityStateType, "platformmetadata": runtime.PlatformMetadataType,
			} {
				ns := resource.Namespace("")

				rd, err := reader.ResolveResourceKind(ctx, &ns, name)
				if err != nil {
					t.Errorf("%s: %q: %v", n.Name, name, err)
				} else if rd.TypedSpec().Type != want || ns == "" {
					t.Errorf("%s: %q resolves to %s in %q, want %s", n.Name, name, rd.TypedSpec().Type, ns, want)
				}
			}
		}
	})

	t.Run("every resource on every node", func(t *testing.T) {
		for _, n := range c.Nodes {
			checkNodeResources(t, c, reader, admin, n)
			checkTalosResources(t, reader, admin, n)
		}
	})

	t.Run("nodes fan-out is refused for COSI as Talos does", func(t *testing.T) {
		_, err := safe.StateListAll[*meta.ResourceDefinition](client.WithNodes(etcdCtx(t), c.Addresses()...), reader.COSI)
		if status.Code(err) != codes.InvalidArgument && !strings.Contains(err.Error(), "InvalidArgument") {
			t.Fatalf("err = %v, want InvalidArgument", err)
		}
	})

	t.Run("clients cannot write", func(t *testing.T) {
		ctx := client.WithNode(etcdCtx(t), c.Nodes[1].Address)

		if err := admin.COSI.Create(ctx, v1alpha1.NewService("fake")); !strings.Contains(errString(err), "read-only") {
			t.Errorf("admin Create: %v", err)
		}

		if err := reader.COSI.Destroy(ctx, runtime.NewMachineStatus().Metadata()); !strings.Contains(errString(err), "PermissionDenied") {
			t.Errorf("reader Destroy: %v", err)
		}
	})

	t.Run("watch of machinestatus sees a service restart", func(t *testing.T) {
		watchRestart(t, admin, reader, cp)
	})

	t.Run("time", func(t *testing.T) {
		ctx := client.WithNodes(etcdCtx(t), c.Addresses()...)

		resp, err := reader.Time(ctx)
		if err != nil || len(resp.GetMessages()) != 3 {
			t.Fatalf("Time: %v, %v", resp, err)
		}

		for _, m := range resp.GetMessages() {
			if d := m.GetRemotetime().AsTime().Sub(m.GetLocaltime().AsTime()); d != 0 || time.Since(m.GetLocaltime().AsTime()) > time.Minute {
				t.Errorf("%s: local %v remote %v: a trusted host clock is its own reference", m.GetMetadata().GetHostname(), m.GetLocaltime(), m.GetRemotetime())
			}
		}

		_, err = reader.TimeCheck(client.WithNode(etcdCtx(t), cp.Address), "pool.ntp.org")
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "host clock") {
			t.Errorf("TimeCheck on a node without servers: %v", err)
		}
	})

	t.Run("processes", func(t *testing.T) {
		resp, err := reader.Processes(client.WithNodes(etcdCtx(t), c.Addresses()...))
		if err != nil || len(resp.GetMessages()) != 3 {
			t.Fatalf("Processes: %v, %v", resp, err)
		}

		for _, m := range resp.GetMessages() {
			var cmds []string
			for _, p := range m.GetProcesses() {
				cmds = append(cmds, p.GetCommand())
			}

			want := []string{"machined", "apid"}
			if m.GetMetadata().GetHostname() == cp.Address {
				want = append(want, "trustd", "etcd")
			}

			for _, w := range want {
				if !slices.Contains(cmds, w) {
					t.Errorf("%s: processes %v lack %s", m.GetMetadata().GetHostname(), cmds, w)
				}
			}

			if slices.Contains(cmds, "systemd") || slices.Contains(cmds, "init") {
				t.Errorf("%s: the host's processes are listed: %v", m.GetMetadata().GetHostname(), cmds)
			}
		}
	})

	t.Run("aegisctl get", func(t *testing.T) {
		checkAegisctlGet(t, &cliCluster{Cluster: c, home: t.TempDir(), dir: t.TempDir()}, admin)
	})

	t.Run("dmesg and rollback say why not", func(t *testing.T) {
		stream, err := reader.MachineClient.Dmesg(client.WithNode(etcdCtx(t), cp.Address), &machine.DmesgRequest{})
		if err == nil {
			_, err = stream.Recv()
		}

		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "kernel log belongs to the host") {
			t.Errorf("Dmesg: %v", err)
		}

		_, err = admin.MachineClient.Rollback(client.WithNode(etcdCtx(t), cp.Address), &machine.RollbackRequest{})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no previous version") {
			t.Errorf("Rollback of a node never upgraded: %v", err)
		}
	})

	t.Run("aegisctl dashboard", func(t *testing.T) {
		checkDashboard(t, &cliCluster{Cluster: c, home: t.TempDir(), dir: t.TempDir()})
	})

	// Last: it takes a worker away.
	t.Run("reboot and shutdown --wait follow the machine status", func(t *testing.T) {
		checkLifecycleWait(t, &cliCluster{Cluster: c, home: t.TempDir(), dir: t.TempDir()})
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}

	return err.Error()
}

// checkNodeResources reads each resource of n through the control plane.
func checkNodeResources(t *testing.T, c *localcluster.Cluster, reader, admin *client.Client, n localcluster.Node) {
	t.Helper()

	ctx := client.WithNode(etcdCtx(t), n.Address)
	cosi := reader.COSI

	ms, err := safe.StateGet[*runtime.MachineStatus](ctx, cosi, runtime.NewMachineStatus().Metadata())
	if err != nil || ms.TypedSpec().Stage != runtime.MachineStageRunning {
		t.Errorf("%s: machine status %v, %v", n.Name, ms, err)
	}

	svcs, err := safe.StateListAll[*v1alpha1.Service](ctx, cosi)
	if err != nil {
		t.Fatalf("%s: services: %v", n.Name, err)
	}

	ids := map[string]bool{}
	for s := range svcs.All() {
		ids[s.Metadata().ID()] = s.TypedSpec().Running
	}

	if !ids["apid"] || n.Type.IsControlPlane() && (!ids["trustd"] || !ids["etcd"]) {
		t.Errorf("%s: services %v", n.Name, ids)
	}

	ts, err := safe.StateGet[*timeres.Status](ctx, cosi, timeres.NewStatus().Metadata())
	if err != nil || !ts.TypedSpec().Synced || !ts.TypedSpec().SyncDisabled {
		t.Errorf("%s: time status %v, %v (a local cluster trusts the host clock)", n.Name, ts, err)
	}

	hn, err := safe.StateGet[*network.HostnameStatus](ctx, cosi, network.NewHostnameStatus(network.NamespaceName, network.HostnameID).Metadata())
	if err != nil || hn.TypedSpec().Hostname != n.Name {
		t.Errorf("%s: hostname %v, %v", n.Name, hn, err)
	}

	nn, err := safe.StateGet[*k8s.Nodename](ctx, cosi, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata())
	if err != nil || nn.TypedSpec().Nodename != n.Name {
		t.Errorf("%s: nodename %v, %v", n.Name, nn, err)
	}

	addrs, err := safe.StateGet[*network.NodeAddress](ctx, cosi, network.NewNodeAddress(network.NamespaceName, network.NodeAddressCurrentID).Metadata())
	if err != nil || len(addrs.TypedSpec().Addresses) != 1 || addrs.TypedSpec().Addresses[0].Addr().String() != n.Address {
		t.Errorf("%s: node addresses %v, %v", n.Name, addrs, err)
	}

	checkEtcdMember(t, admin, ctx, n)
	checkCertificates(t, c, ctx, cosi, n)
	checkMachineConfig(t, c, ctx, cosi, n)
}

func checkEtcdMember(t *testing.T, admin *client.Client, ctx context.Context, n localcluster.Node) { //nolint:revive // ctx carries the node
	t.Helper()

	list, err := safe.StateListAll[*etcd.Member](ctx, admin.COSI)
	if err != nil {
		t.Fatalf("%s: etcd members: %v", n.Name, err)
	}

	if !n.Type.IsControlPlane() {
		if list.Len() != 0 {
			t.Errorf("%s: a worker has etcd members %v", n.Name, list)
		}

		return
	}

	// The member is recorded once the node's etcd answers, which can be
	// a moment after the cluster is up.
	eventually(t, n.Name+": the local etcd member recorded", func() error {
		list, err = safe.StateListAll[*etcd.Member](ctx, admin.COSI)
		if err == nil && list.Len() != 1 {
			err = fmt.Errorf("etcd members %v", list)
		}

		return err
	})

	st, err := admin.EtcdStatus(ctx)
	if err != nil {
		t.Fatalf("%s: etcd status: %v", n.Name, err)
	}

	if got, want := list.Get(0).TypedSpec().MemberID, etcd.FormatMemberID(st.GetMessages()[0].GetMemberStatus().GetMemberId()); got != want {
		t.Errorf("%s: local member %s, etcd says %s", n.Name, got, want)
	}
}

// checkCertificates: the node's server certificate, issued by the
// cluster's OS CA, named by that CA's fingerprint; never a key.
func checkCertificates(t *testing.T, c *localcluster.Cluster, ctx context.Context, cosi state.State, n localcluster.Node) { //nolint:revive // ctx carries the node
	t.Helper()

	bundle, err := certs.LoadBundle(c.SecretsPath(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	block, _ := pem.Decode(bundle.Certs.OS.Crt)
	sum := sha256.Sum256(block.Bytes)
	caFP := hex.EncodeToString(sum[:])

	list, err := safe.StateListAll[*resourcetypes.CertificateStatus](ctx, cosi)
	if err != nil {
		t.Fatalf("%s: certificates: %v", n.Name, err)
	}

	kinds := map[string]resourcetypes.CertificateStatusSpec{}
	for r := range list.All() {
		kinds[r.Metadata().ID()] = *r.TypedSpec()
	}

	server, ok := kinds["server"]
	if !ok || server.IssuerFingerprint != caFP || !slices.Contains(server.IPAddresses, n.Address) || time.Until(server.NotAfter) <= 0 {
		t.Errorf("%s: server certificate %+v (CA %s)", n.Name, server, caFP)
	}

	if ca, ok := kinds["ca-"+caFP[:16]]; !ok || ca.Kind != resourcetypes.CertKindAcceptedCA || !ca.IsCA {
		t.Errorf("%s: accepted CA missing: %v", n.Name, kinds)
	}

	if _, ok := kinds["os-ca"]; ok != n.Type.IsControlPlane() {
		t.Errorf("%s: os-ca present %v on a %s", n.Name, ok, n.Type)
	}

	etcdBlock, _ := pem.Decode(bundle.Certs.Etcd.Crt)
	etcdSum := sha256.Sum256(etcdBlock.Bytes)

	for _, id := range []string{"etcd-ca", "etcd-server", "etcd-peer", "etcd-client"} {
		cert, ok := kinds[id]
		if ok != n.Type.IsControlPlane() {
			t.Errorf("%s: %s present %v on a %s", n.Name, id, ok, n.Type)
		}

		if ok && (cert.IssuerFingerprint != hex.EncodeToString(etcdSum[:]) || time.Until(cert.NotAfter) <= 0) {
			t.Errorf("%s: %s %+v, want issued by the etcd CA", n.Name, id, cert)
		}
	}
}

// checkMachineConfig: the config the node booted with, with no key and no
// token left in it.
func checkMachineConfig(t *testing.T, c *localcluster.Cluster, ctx context.Context, cosi state.State, n localcluster.Node) { //nolint:revive // ctx carries the node
	t.Helper()

	mc, err := safe.StateGet[*resourcetypes.MachineConfig](ctx, cosi, resourcetypes.NewMachineConfig().Metadata())
	if err != nil {
		t.Fatalf("%s: machine config: %v", n.Name, err)
	}

	raw, err := os.ReadFile(c.ConfigPath(n))
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.ParseMachineConfig("config", raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	doc := mc.TypedSpec().Document
	for _, secret := range []string{cfg.Machine.Token, string(cfg.Machine.CA.Key), "PRIVATE KEY"} {
		if secret != "" && strings.Contains(doc, secret) {
			t.Errorf("%s: the served machine config holds a secret (%.12s…)", n.Name, secret)
		}
	}

	if !strings.Contains(doc, n.Name) || !slices.Contains(mc.TypedSpec().Redacted, "machine.token") {
		t.Errorf("%s: machine config %q, redacted %v", n.Name, doc, mc.TypedSpec().Redacted)
	}
}

// watchRestart watches the control plane's machine status while trustd
// restarts: ready, then not ready naming trustd, then ready again.
func watchRestart(t *testing.T, admin, reader *client.Client, cp localcluster.Node) {
	t.Helper()

	ctx, cancel := context.WithCancel(client.WithNode(etcdCtx(t), cp.Address))
	defer cancel()

	events := make(chan state.Event, 64)
	if err := reader.COSI.Watch(ctx, runtime.NewMachineStatus().Metadata(), events); err != nil {
		t.Fatal(err)
	}

	next := func(what string, ok func(*runtime.MachineStatusSpec) bool) {
		t.Helper()

		for {
			select {
			case ev := <-events:
				if ev.Type == state.Errored {
					t.Fatalf("watch: %v", ev.Error)
				}

				if ms, isMS := ev.Resource.(*runtime.MachineStatus); isMS && ok(ms.TypedSpec()) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("watch: no %s", what)
			}
		}
	}

	next("ready status", func(s *runtime.MachineStatusSpec) bool { return s.Status.Ready })

	if _, err := admin.ServiceRestart(client.WithNode(etcdCtx(t), cp.Address), "trustd"); err != nil {
		t.Fatal(err)
	}

	next("unmet services condition", func(s *runtime.MachineStatusSpec) bool {
		return !s.Status.Ready && slices.ContainsFunc(s.Status.UnmetConditions, func(u runtime.UnmetCondition) bool {
			return u.Name == "services" && strings.Contains(u.Reason, "trustd")
		})
	})
	next("ready again", func(s *runtime.MachineStatusSpec) bool { return s.Status.Ready })
}

// checkAegisctlGet: aegisctl get lists, gets, prints JSON and YAML, and
// watches, on the nodes named or the endpoint's own.
func checkAegisctlGet(t *testing.T, c *cliCluster, admin *client.Client) {
	t.Helper()

	cp, w1 := c.Nodes[0], c.Nodes[1]

	rows := func(out string) map[string]bool {
		m := map[string]bool{}
		for line := range strings.Lines(out) {
			m[strings.Join(strings.Fields(line), " ")] = true
		}

		return m
	}

	rd := rows(c.ok(t, c.admin(), "-n", c.all(), "get", "rd"))
	for _, n := range c.Nodes {
		if !rd[n.Address+" meta ResourceDefinition machinestatuses.runtime.talos.dev 1 machinestatus,ms"] {
			t.Errorf("get rd lacks %s's machine status definition:\n%v", n.Name, rd)
		}
	}

	ms := rows(c.ok(t, c.admin(), "-n", cp.Address+","+w1.Address, "get", "machinestatus"))
	for _, n := range []string{cp.Address, w1.Address} {
		found := false
		for row := range ms {
			found = found || strings.HasPrefix(row, n+" runtime MachineStatus machine ") && strings.HasSuffix(row, " running true")
		}

		if !ms["NODE NAMESPACE TYPE ID VERSION STAGE READY"] || !found {
			t.Errorf("get machinestatus on %s:\n%v", n, ms)
		}
	}

	var doc struct {
		Metadata struct{ ID string }    `json:"metadata"`
		Spec     struct{ Stage string } `json:"spec"`
	}

	if err := json.Unmarshal([]byte(c.ok(t, c.admin(), "get", "ms", "-o", "json")), &doc); err != nil || doc.Metadata.ID != "machine" || doc.Spec.Stage != "running" {
		t.Errorf("get ms -o json: %+v, %v", doc, err)
	}

	certYAML := c.ok(t, c.admin(), "-n", w1.Address, "get", "certs", "server", "-o", "yaml")
	if !strings.Contains(certYAML, "issuerFingerprint:") || !strings.Contains(certYAML, "node: "+w1.Address) || strings.Contains(certYAML, "PRIVATE") {
		t.Errorf("get certs server -o yaml:\n%s", certYAML)
	}

	if res := c.ctl(t, c.admin(), "get", "nosuchtype"); res.code == 0 || !strings.Contains(res.stderr, "not registered") {
		t.Errorf("get nosuchtype: exit %d, %s", res.code, res.stderr)
	}

	var restart sync.Once

	out := c.stream(t, c.admin(), func(out string) bool {
		if strings.Contains(out, "+\truntime\tService\ttrustd") {
			restart.Do(func() {
				go admin.ServiceRestart(client.WithNode(context.Background(), cp.Address), "trustd") //nolint:errcheck // the watch shows it
			})
		}

		return strings.Count(out, "runtime\tService\ttrustd") >= 3
	}, "get", "services", "--watch")

	if !strings.Contains(out, " \truntime\tService\ttrustd") {
		t.Errorf("get services --watch saw no update of trustd:\n%s", out)
	}
}

// checkTimeWithNTP: a node synced against a real NTP server reports it in
// Time, TimeCheck and its time resources; TimeCheck asks no other server.
func checkTimeWithNTP(t *testing.T, c *client.Client, server string) {
	t.Helper()

	resp, err := c.Time(etcdCtx(t))
	if err != nil {
		t.Fatal(err)
	}

	m := resp.GetMessages()[0]
	if d := m.GetRemotetime().AsTime().Sub(m.GetLocaltime().AsTime()); m.GetServer() != server || d > time.Second || d < -time.Second {
		t.Errorf("Time: server %q, remote - local = %s", m.GetServer(), d)
	}

	if resp, err = c.TimeCheck(etcdCtx(t), server); err != nil || resp.GetMessages()[0].GetServer() != server {
		t.Errorf("TimeCheck %s: %v, %v", server, resp, err)
	}

	if _, err = c.TimeCheck(etcdCtx(t), "127.0.0.1:123"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("TimeCheck of a server not the node's: %v", err)
	}

	ntp, err := safe.StateGet[*resourcetypes.NTPStatus](etcdCtx(t), c.COSI, resourcetypes.NewNTPStatus().Metadata())
	if err != nil || !ntp.TypedSpec().Synced || ntp.TypedSpec().Server != server || ntp.TypedSpec().Checked.IsZero() {
		t.Errorf("NTP status %v, %v", ntp, err)
	}

	ts, err := safe.StateGet[*timeres.Status](etcdCtx(t), c.COSI, timeres.NewStatus().Metadata())
	if err != nil || !ts.TypedSpec().Synced || ts.TypedSpec().SyncDisabled {
		t.Errorf("time status %v, %v", ts, err)
	}
}

// checkLifecycleWait: reboot --wait of two workers through the control
// plane prints their stages until both are running and ready again (their
// machine status watched with the Talos client across the reboot);
// shutdown --wait of one ends once its API is gone.
func checkLifecycleWait(t *testing.T, c *cliCluster) {
	t.Helper()

	w1, w2 := c.Nodes[1].Address, c.Nodes[2].Address

	out := c.ok(t, c.admin(), "-n", w1+","+w2, "reboot", "--wait")
	for _, w := range []string{w1, w2} {
		if !strings.Contains(out, w+"\trunning, ready") ||
			!strings.Contains(out, w+"\tbooting") && !strings.Contains(out, w+"\trebooting") && !strings.Contains(out, w+"\tAPI down") {
			t.Errorf("reboot --wait of %s:\n%s", w, out)
		}
	}

	if res := c.ctl(t, c.admin(), "-n", w2, "version"); res.code != 0 {
		t.Errorf("%s after reboot --wait: %s", w2, res.stderr)
	}

	out = c.ok(t, c.admin(), "-n", w2, "shutdown", "--wait")
	if !strings.Contains(out, w2+"\tdown") {
		t.Errorf("shutdown --wait:\n%s", out)
	}

	if res := c.ctl(t, c.admin(), "-n", w2, "version"); res.code == 0 {
		t.Errorf("%s answers after shutdown --wait", w2)
	}
}

// checkDashboard: one view of every node, from the resource API, with
// their recent events.
func checkDashboard(t *testing.T, c *cliCluster) {
	t.Helper()

	out := c.ok(t, c.admin(), "-n", c.all(), "dashboard", "--once")

	for _, n := range c.Nodes {
		var row string

		for line := range strings.Lines(out) {
			if row == "" && strings.HasPrefix(line, n.Address+" ") {
				row = strings.Join(strings.Fields(line), " ") + " "
			}
		}

		want := []string{" running yes ", " up ", " MiB ", "synced (host clock)", "server 23h"}
		if n.Type.IsControlPlane() {
			want = append(want, "4/4 up", " of 1")
		}

		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("%s: row %q lacks %q", n.Name, row, w)
			}
		}
	}

	if !strings.Contains(out, "RECENT EVENTS") || !strings.Contains(out, "machine.ServiceStateEvent") || strings.Contains(out, "\x1b[") {
		t.Errorf("dashboard --once:\n%s", out)
	}
}
