package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The configuration tests' cluster: one control plane, one worker.
const applyCIDR = "127.6.8.0/28"

// applyEnv is the cluster of the configuration tests, its worker, and the
// Talos machinery client of its admin.
type applyEnv struct {
	*cliCluster

	worker localcluster.Node
	talos  *client.Client
}

func startApplyEnv(t *testing.T) *applyEnv {
	t.Helper()

	c := startClusterIn(t, "apply", applyCIDR, 1)
	e := &applyEnv{cliCluster: c, talos: talosClient(t, c.admin())}

	for _, n := range c.Nodes {
		if n.Type == certs.NodeWorker {
			e.worker = n
		}
	}

	return e
}

// ctx routes a call to the worker.
func (e *applyEnv) ctx(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)

	return client.WithNode(ctx, e.worker.Address)
}

// inEffect reads the worker's config in effect through the API.
func (e *applyEnv) inEffect(t *testing.T) (*certs.MachineConfig, bool) {
	t.Helper()

	resp, err := machineconfig.NewMachineConfigServiceClient(e.talos.Conn()).Get(e.ctx(t), &machineconfig.GetRequest{})
	if err != nil {
		t.Fatal(err)
	}

	m := resp.GetMessages()[0]

	cfg, err := certs.ParseMachineConfig("in effect", m.GetData(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	return cfg, m.GetStaged()
}

// onDisk reads the worker's config file.
func (e *applyEnv) onDisk(t *testing.T) []byte {
	t.Helper()

	data, err := os.ReadFile(e.ConfigPath(e.worker))
	if err != nil {
		t.Fatal(err)
	}

	return data
}

// edited is the worker's config on disk changed by edit, as YAML.
func (e *applyEnv) edited(t *testing.T, edit func(*certs.MachineConfig)) []byte {
	t.Helper()

	cfg, err := certs.LoadMachineConfig(e.ConfigPath(e.worker), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	edit(cfg)

	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	return data
}

func (e *applyEnv) apply(t *testing.T, req *machine.ApplyConfigurationRequest) (*machine.ApplyConfiguration, error) {
	t.Helper()

	resp, err := e.talos.ApplyConfiguration(e.ctx(t), req)
	if err != nil {
		return nil, err
	}

	return resp.GetMessages()[0], nil
}

// machinedLog is the worker machined's log so far.
func (e *applyEnv) machinedLog(t *testing.T) string {
	t.Helper()

	data, err := os.ReadFile(e.LogPath(e.worker))
	if err != nil {
		t.Fatal(err)
	}

	return string(data)
}

// TestApplyConfiguration drives ApplyConfiguration on a worker of a real
// 1+1 cluster with the Talos machinery client and aegisctl: validation,
// live, refused, staged, try and dry-run applies, and both kinds of patch.
func TestApplyConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}

	e := startApplyEnv(t)
	pid := e.worker.PID

	t.Run("invalid config: every problem, nothing changed", func(t *testing.T) { checkApplyInvalid(t, e) })
	t.Run("identity change refused", func(t *testing.T) { checkApplyIdentity(t, e) })
	t.Run("a control plane's config refused to the worker", func(t *testing.T) { checkApplyWrongRole(t, e) })
	t.Run("no-reboot of a reboot-only field refused", func(t *testing.T) { checkApplyNeedsReboot(t, e) })
	t.Run("dry run", func(t *testing.T) { checkApplyDryRun(t, e) })
	t.Run("time servers live", func(t *testing.T) { checkApplyTimeLive(t, e) })
	t.Run("staged", func(t *testing.T) { checkApplyStaged(t, e) })
	t.Run("try rolls back", func(t *testing.T) { checkApplyTry(t, e) })
	t.Run("patches", func(t *testing.T) { checkApplyPatches(t, e) })
	t.Run("accepted CAs live", func(t *testing.T) { checkApplyAcceptedCA(t, e) })
	t.Run("auto reboots for a reboot-only field", func(t *testing.T) { checkApplyAutoReboots(t, e) })
	t.Run("static token live on the control plane", func(t *testing.T) { checkApplyToken(t, e) })

	if pids := pidsOf(filepath.Join(binDir, "machined"), e.StatePath(e.worker)); len(pids) != 1 || pids[0] != pid {
		t.Errorf("the worker's machined changed: %v, was %d", pids, pid)
	}
}

func checkApplyInvalid(t *testing.T, e *applyEnv) {
	before, _ := e.inEffect(t)
	disk := e.onDisk(t)

	bad := e.edited(t, func(c *certs.MachineConfig) {
		c.Version = "v9"
		c.Machine.CertSANs = []string{"not a name!"}
		c.Machine.Time = certs.TimeSpec{Servers: []string{"bad host!"}}
	})

	_, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: bad, Mode: machine.ApplyConfigurationRequest_AUTO})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument, got %v", err)
	}

	for _, path := range []string{"version:", "machine.certSANs[0]:", "machine.time.servers[0]:"} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("the refusal does not name %s: %v", path, err)
		}
	}

	if !bytes.Equal(e.onDisk(t), disk) {
		t.Error("the config file changed")
	}

	if after, _ := e.inEffect(t); !equalConfigs(t, before, after) {
		t.Error("the config in effect changed")
	}
}

func checkApplyIdentity(t *testing.T, e *applyEnv) {
	data := e.edited(t, func(c *certs.MachineConfig) { c.Cluster.Name = "another" })

	_, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_AUTO})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cluster.name") {
		t.Fatalf("want InvalidArgument naming cluster.name, got %v", err)
	}
}

// checkApplyWrongRole: the control plane's config, which carries the
// cluster's CA keys, is refused by apid before it is sent to the worker,
// routed through the control plane or at the worker's own apid, naming
// both roles. (machined's own refusal of the other machine type is
// TestClassifyRefusesTheOtherMachineType.)
func checkApplyWrongRole(t *testing.T, e *applyEnv) {
	disk := e.onDisk(t)
	seen := strings.Count(e.machinedLog(t), "ApplyConfiguration")

	data, err := os.ReadFile(e.ConfigPath(e.ControlPlanes()[0]))
	if err != nil {
		t.Fatal(err)
	}

	req := &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT, DryRun: true}
	want := "is a worker; the configuration is for a controlplane: refused, it carries the cluster's CA keys"

	_, err = e.apply(t, req)
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "apid: node "+e.worker.Address+" "+want {
		t.Errorf("routed through the control plane: %v, want FailedPrecondition naming the worker and both roles", err)
	}

	direct := e.nodeTalos(t, e.worker)
	if _, err = direct.ApplyConfiguration(ctx(t), req); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "this node "+want) {
		t.Errorf("at the worker's apid: %v, want FailedPrecondition", err)
	}

	if !bytes.Equal(e.onDisk(t), disk) {
		t.Error("the config file changed")
	}

	if strings.Count(e.machinedLog(t), "ApplyConfiguration") != seen {
		t.Error("the worker's machined logged an ApplyConfiguration")
	}
}

// nodeTalos is a Talos client of the cluster's admin connected to n's own
// apid.
func (e *applyEnv) nodeTalos(t *testing.T, n localcluster.Node) *client.Client {
	t.Helper()

	cli, err := e.NodeClient(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() }) //nolint:errcheck // closing a client in cleanup

	return cli
}

func checkApplyNeedsReboot(t *testing.T, e *applyEnv) {
	disk := e.onDisk(t)
	data := e.edited(t, func(c *certs.MachineConfig) { c.Machine.CertSANs = []string{"extra.example"} })

	_, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "machine.certSANs") {
		t.Fatalf("want FailedPrecondition naming machine.certSANs, got %v", err)
	}

	if !bytes.Equal(e.onDisk(t), disk) {
		t.Error("the config file changed")
	}
}

func checkApplyDryRun(t *testing.T, e *applyEnv) {
	disk := e.onDisk(t)
	data := e.edited(t, func(c *certs.MachineConfig) { c.Cluster.WorkerSANs = []string{"dry.example"} })

	path := filepath.Join(e.dir, "dry.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	out := e.ok(t, e.admin(), "apply-config", "-n", e.worker.Address, "-f", path, "--dry-run")
	for _, want := range []string{"Dry run summary", "cluster.workerSANs", "+        - dry.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}

	if cfg, _ := e.inEffect(t); strings.Contains(out, cfg.Machine.Token) {
		t.Errorf("the diff shows the token:\n%s", out)
	}

	if !bytes.Equal(e.onDisk(t), disk) {
		t.Error("the config file changed")
	}

	if cfg, _ := e.inEffect(t); len(cfg.Cluster.WorkerSANs) != 0 {
		t.Error("the config in effect changed")
	}
}

// checkApplyTimeLive moves the worker from its trusted host clock to a
// chronyd, without a reboot, and measures until its time service has synced
// with it.
func checkApplyTimeLive(t *testing.T, e *applyEnv) {
	ntp := startChrony(t, "127.0.0.1")
	data := e.edited(t, func(c *certs.MachineConfig) { c.Machine.Time = certs.TimeSpec{Servers: []string{ntp.addr}} })
	logged := len(e.machinedLog(t))

	start := time.Now()

	m, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT})
	if err != nil {
		t.Fatal(err)
	}

	if m.GetMode() != machine.ApplyConfigurationRequest_NO_REBOOT {
		t.Errorf("mode %s", m.GetMode())
	}

	deadline := time.Now().Add(timeout)
	for !strings.Contains(e.machinedLog(t)[logged:], `"server":"`+ntp.addr+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the time service never used %s:\n%s", ntp.addr, e.machinedLog(t)[logged:])
		}

		time.Sleep(5 * time.Millisecond)
	}

	t.Logf("FIGURE time servers: ApplyConfiguration call to the first sync with the new server: %s", time.Since(start).Round(time.Millisecond))

	if !bytes.Equal(e.onDisk(t), data) {
		t.Error("the config file is not the applied one")
	}

	if fi, err := os.Stat(e.ConfigPath(e.worker)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode: %v %v", fi.Mode(), err)
	}

	if fi, err := os.Stat(filepath.Join(e.StatePath(e.worker), "config.previous.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the previous config was not kept, 0600: %v", err)
	}
}

func checkApplyStaged(t *testing.T, e *applyEnv) {
	data := e.edited(t, func(c *certs.MachineConfig) { c.Machine.CertSANs = []string{"staged.example"} })

	m, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_STAGED})
	if err != nil {
		t.Fatal(err)
	}

	if m.GetMode() != machine.ApplyConfigurationRequest_STAGED {
		t.Errorf("mode %s", m.GetMode())
	}

	if !bytes.Equal(e.onDisk(t), data) {
		t.Error("the staged config was not written")
	}

	cfg, staged := e.inEffect(t)
	if len(cfg.Machine.CertSANs) != 0 || !staged {
		t.Errorf("a staged config is in effect (SANs %v, staged %v)", cfg.Machine.CertSANs, staged)
	}

	// Unstage: the config in effect, written again.
	cur, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := e.apply(t, &machine.ApplyConfigurationRequest{Data: cur, Mode: machine.ApplyConfigurationRequest_NO_REBOOT}); err != nil {
		t.Fatal(err)
	}
}

func checkApplyTry(t *testing.T, e *applyEnv) {
	disk := e.onDisk(t)
	data := e.edited(t, func(c *certs.MachineConfig) { c.Cluster.WorkerSANs = []string{"try.example"} })

	start := time.Now()

	_, err := e.apply(t, &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_TRY, TryModeTimeout: durationpb.New(2 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}

	if cfg, _ := e.inEffect(t); len(cfg.Cluster.WorkerSANs) != 1 {
		t.Fatalf("the trial is not in effect: %v", cfg.Cluster.WorkerSANs)
	}

	if !bytes.Equal(e.onDisk(t), disk) {
		t.Error("a trial was written to disk")
	}

	waitUntil(t, "the trial rolled back", func() bool {
		cfg, _ := e.inEffect(t)

		return len(cfg.Cluster.WorkerSANs) == 0
	})

	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("rolled back after %s, before its timeout", d)
	}
}

func checkApplyPatches(t *testing.T, e *applyEnv) {
	e.ok(t, e.admin(), "patch", "machineconfig", "-n", e.worker.Address, "--mode", "no-reboot",
		"--patch", `[{"op":"add","path":"/cluster/workerSANs","value":["json.example"]}]`)

	if cfg, _ := e.inEffect(t); strings.Join(cfg.Cluster.WorkerSANs, ",") != "json.example" {
		t.Fatalf("JSON patch: worker SANs %v", cfg.Cluster.WorkerSANs)
	}

	patch := filepath.Join(e.dir, "merge.yaml")
	if err := os.WriteFile(patch, []byte("cluster:\n  workerSANs: [merge.example, \"*.merge.example\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	e.ok(t, e.admin(), "patch", "mc", "-n", e.worker.Address, "--patch", "@"+patch)

	cfg, staged := e.inEffect(t)
	if strings.Join(cfg.Cluster.WorkerSANs, ",") != "merge.example,*.merge.example" || staged {
		t.Fatalf("merge patch: worker SANs %v, staged %v", cfg.Cluster.WorkerSANs, staged)
	}
}

func equalConfigs(t *testing.T, a, b *certs.MachineConfig) bool {
	t.Helper()

	fields, err := certs.ChangedFields(a, b)
	if err != nil {
		t.Fatal(err)
	}

	return len(fields) == 0
}
