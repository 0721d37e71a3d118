package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logtest"
)

// Addresses of the machined tests.
const (
	machinedCP     = "127.0.3.2"
	machinedWorker = "127.0.3.3"
)

// machinedProc is a real machined process of a test.
type machinedProc struct {
	cmd    *exec.Cmd
	out    *logtest.Sink
	exited chan struct{}
}

// startMachined runs machined on cfg with its state under dir, and stops it
// (SIGTERM, then SIGKILL) when the test ends.
func startMachined(t *testing.T, cfg, state string) *machinedProc {
	t.Helper()

	return startMachinedWith(t, cfg, state)
}

// startMachinedWith is startMachined with more flags.
func startMachinedWith(t *testing.T, cfg, state string, flags ...string) *machinedProc {
	t.Helper()

	p := &machinedProc{out: &logtest.Sink{}, exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "machined"), append([]string{"--config", cfg, "--state", state, "--bin-dir", binDir}, flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out

	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}

	go func() {
		p.cmd.Wait() //nolint:errcheck // the exit is observed through exited
		close(p.exited)
	}()

	t.Cleanup(func() {
		p.stop()

		if t.Failed() {
			t.Logf("machined %s output:\n%s", state, p.out.String())
		}
	})

	return p
}

// stop ends machined: SIGTERM, then SIGKILL if it takes too long. Calling
// it again is harmless.
func (p *machinedProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)

	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitReady waits for the node's "node ready" log record.
func (p *machinedProc) waitReady(t *testing.T) {
	t.Helper()

	deadline := time.Now().Add(timeout)

	for !strings.Contains(p.out.String(), `"msg":"node ready"`) {
		select {
		case <-p.exited:
			t.Fatalf("machined exited:\n%s", p.out.String())
		default:
		}

		if time.Now().After(deadline) {
			t.Fatalf("node not ready:\n%s", p.out.String())
		}

		time.Sleep(20 * time.Millisecond)
	}
}

// genConfigs runs `aegisctl gen config` and places the nodes on their addresses.
func genConfigs(t *testing.T, dir string) (cp, worker string) {
	t.Helper()

	out, err := exec.Command(filepath.Join(binDir, "aegisctl"), "gen", "config", "e2e", machinedCP, "--trust-host-clock", "-o", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("aegisctl gen config: %v\n%s", err, out)
	}

	place := func(path, hostname, addr string) string {
		cfg, err := certs.LoadMachineConfig(path, time.Now())
		if err != nil {
			t.Fatal(err)
		}

		cfg.Machine.Hostname, cfg.Machine.ListenAddress = hostname, addr
		if err = cfg.Save(path, true); err != nil {
			t.Fatal(err)
		}

		return path
	}

	return place(filepath.Join(dir, "controlplane.yaml"), "e2e-cp", machinedCP),
		place(filepath.Join(dir, "worker.yaml"), "e2e-worker", machinedWorker)
}

func talosClient(t *testing.T, configPath string) *client.Client {
	t.Helper()

	cfg, err := clientconfig.Open(configPath)
	if err != nil {
		t.Fatal(err)
	}

	c, err := client.New(context.Background(), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() })

	return c
}

// TestMachinedNode boots a control plane from `aegisctl gen config` output,
// drives it through the real apid with the Talos client, and joins a worker.
func TestMachinedNode(t *testing.T) {
	needBinaries(t)

	dir, err := os.MkdirTemp("", "aegis-m")
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { os.RemoveAll(dir) })

	cpCfg, workerCfg := genConfigs(t, dir)

	start := time.Now()
	cp := startMachined(t, cpCfg, filepath.Join(dir, "cp"))
	cp.waitReady(t)
	t.Logf("control plane: start to all services up in %s", time.Since(start).Round(time.Millisecond))

	c := talosClient(t, filepath.Join(dir, "aegisconfig"))

	start = time.Now()
	bootstrapEtcd(t, c)
	t.Logf("control plane: bootstrap to etcd healthy in %s", time.Since(start).Round(time.Millisecond))

	t.Run("info", func(t *testing.T) { checkInfo(t, c) })
	t.Run("host statistics", func(t *testing.T) { checkHostStatistics(t, c) })
	t.Run("logs of apid", func(t *testing.T) { checkApidLogs(t, c) })
	t.Run("logs of every service", func(t *testing.T) { checkServiceLogs(t, c) })
	t.Run("calls in machined's log", func(t *testing.T) { checkCallsInMachinedLog(t, c) })
	t.Run("events follow a restart", func(t *testing.T) { checkEventsOfRestart(t, c) })
	t.Run("apid killed", func(t *testing.T) { checkApidKilled(t, c) })

	start = time.Now()
	worker := startMachined(t, workerCfg, filepath.Join(dir, "worker"))
	worker.waitReady(t)
	t.Logf("worker: start to joined and all services up in %s", time.Since(start).Round(time.Millisecond))

	t.Run("worker serves its own API", func(t *testing.T) { checkWorker(t, c, dir) })
	t.Run("reboot", func(t *testing.T) { checkReboot(t, c, cp) })
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, c, worker, machinedWorker) })
}

func checkInfo(t *testing.T, c *client.Client) {
	v, err := c.Version(ctx(t))
	if err != nil || v.Messages[0].GetVersion().GetTag() == "" {
		t.Fatalf("Version: %v %v", v, err)
	}

	checkTalosVersionTag(t, v.Messages[0].GetVersion().GetTag())

	m, err := c.Memory(ctx(t))
	if err != nil || m.Messages[0].GetMeminfo().GetMemtotal() == 0 {
		t.Fatalf("Memory: %v %v", m, err)
	}

	list, err := c.ServiceList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, s := range list.Messages[0].GetServices() {
		got = append(got, fmt.Sprintf("%s=%s/%v", s.GetId(), s.GetState(), s.GetHealth().GetHealthy()))
	}

	if strings.Join(got, ",") != "apid=Running/true,certificates=Running/true,etcd=Running/true,trustd=Running/true" {
		t.Fatalf("services: %v", got)
	}
}

// checkHostStatistics calls what talosctl dashboard and Talos's
// MonitoringSuite call: the host's figures, through the machinery client.
func checkHostStatistics(t *testing.T, c *client.Client) {
	none := &emptypb.Empty{}

	cpus, err := c.MachineClient.CPUInfo(ctx(t), none)
	if err != nil || len(cpus.GetMessages()[0].GetCpuInfo()) == 0 {
		t.Errorf("CPUInfo: %v %v", cpus, err)
	}

	if _, err := c.MachineClient.CPUFreqStats(ctx(t), none); err != nil {
		t.Errorf("CPUFreqStats: %v", err)
	}

	if l, err := c.MachineClient.LoadAvg(ctx(t), none); err != nil || l.GetMessages()[0].GetLoad15() < 0 {
		t.Errorf("LoadAvg: %v %v", l, err)
	}

	if st, err := c.MachineClient.SystemStat(ctx(t), none); err != nil || st.GetMessages()[0].GetBootTime() == 0 {
		t.Errorf("SystemStat: %v %v", st, err)
	}

	if _, err := c.MachineClient.DiskStats(ctx(t), none); err != nil {
		t.Errorf("DiskStats: %v", err)
	}

	net, err := c.MachineClient.NetworkDeviceStats(ctx(t), none)
	if err != nil || !slices.ContainsFunc(net.GetMessages()[0].GetDevices(), func(d *machine.NetDev) bool { return d.GetName() == "lo" }) {
		t.Errorf("NetworkDeviceStats: %v %v", net, err)
	}
}

// bootstrapEtcd forms the control plane's etcd and waits until it is healthy.
func bootstrapEtcd(t *testing.T, c *client.Client) {
	t.Helper()

	if err := c.Bootstrap(ctx(t), &machine.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "etcd healthy after the bootstrap", func() error {
		list, err := c.ServiceList(ctx(t))
		if err == nil && !allRunning(list) {
			err = fmt.Errorf("not all services up: %v", list)
		}

		return err
	})
}

func checkApidLogs(t *testing.T, c *client.Client) {
	stream, err := c.Logs(ctx(t), "system", common.ContainerDriver_CONTAINERD, "apid", false, -1)
	if err != nil {
		t.Fatal(err)
	}

	var all bytes.Buffer

	for {
		d, err := stream.Recv()
		if err == io.EOF {
			break
		}

		if err != nil {
			t.Fatal(err)
		}

		all.Write(d.GetBytes())
	}

	if !strings.Contains(all.String(), `"msg":"apid serving"`) {
		t.Fatalf("apid log:\n%s", all.String())
	}
}

// checkEventsOfRestart follows events while trustd is restarted through the
// API and expects trustd to be seen stopping and running again.
func checkEventsOfRestart(t *testing.T, c *client.Client) {
	evCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	stream, err := c.MachineClient.Events(evCtx, &machine.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if _, err = stream.Recv(); err != nil { // the empty event: the watch is set up
		t.Fatal(err)
	}

	if _, err = c.ServiceRestart(ctx(t), "trustd"); err != nil {
		t.Fatal(err)
	}

	var seen []string

	for !strings.Contains(strings.Join(seen, ","), "STOPPING,FINISHED") || seen[len(seen)-1] != "RUNNING" {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("events so far %v: %v", seen, err)
		}

		decoded, err := client.UnmarshalEvent(ev)
		if err != nil {
			continue
		}

		if s, ok := decoded.Payload.(*machine.ServiceStateEvent); ok && s.GetService() == "trustd" {
			seen = append(seen, s.GetAction().String())
		}
	}
}

var startedPID = regexp.MustCompile(`process (\d+) started`)

// checkApidKilled kills apid with SIGKILL and expects machined to restart it
// and the API to answer again.
func checkApidKilled(t *testing.T, c *client.Client) {
	pid := servicePID(t, c, "apid")

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(timeout)

	for {
		if _, err := c.Version(ctx(t)); err == nil {
			if again := servicePID(t, c, "apid"); again != pid {
				return
			}
		}

		if time.Now().After(deadline) {
			t.Fatal("the API did not come back after apid was killed")
		}

		time.Sleep(100 * time.Millisecond)
	}
}

// servicePID reads a service's current process from its latest Running event.
func servicePID(t *testing.T, c *client.Client, id string) int {
	t.Helper()

	list, err := c.ServiceList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range list.Messages[0].GetServices() {
		if s.GetId() != id {
			continue
		}

		events := s.GetEvents().GetEvents()
		for i := len(events) - 1; i >= 0; i-- {
			if m := startedPID.FindStringSubmatch(events[i].GetMsg()); m != nil {
				var pid int
				fmt.Sscan(m[1], &pid) //nolint:errcheck // the pattern matched digits

				return pid
			}
		}
	}

	t.Fatalf("no running process of %s", id)

	return 0
}

func checkWorker(t *testing.T, c *client.Client, dir string) {
	// A ready worker is a member; the control plane's apid learns it from
	// its etcd watch, which takes milliseconds, not seconds.
	var (
		h   *machine.HostnameResponse
		err error
	)

	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		h, err = c.MachineClient.Hostname(client.WithNode(ctx(t), machinedWorker), &emptypb.Empty{})
		if err == nil || time.Since(start) > 2*time.Second {
			break
		}
	}

	if err != nil || h.Messages[0].GetHostname() != "e2e-worker" {
		t.Fatalf("worker through the control plane: %v %v", h, err)
	}

	// Straight to the worker's own apid, whose certificate came from trustd.
	cfg, err := clientconfig.Open(filepath.Join(dir, "aegisconfig"))
	if err != nil {
		t.Fatal(err)
	}

	cfg.Contexts[cfg.Context].Endpoints = []string{machinedWorker}

	direct, err := client.New(context.Background(), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	list, err := direct.ServiceList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	var ids []string
	for _, s := range list.Messages[0].GetServices() {
		ids = append(ids, s.GetId())
	}

	if strings.Join(ids, ",") != "apid,certificates" {
		t.Fatalf("worker services: %v", ids)
	}
}

// checkReboot reboots the control plane through the API: its services are
// stopped and the boot sequence runs again, tagged with the reply's actor.
func checkReboot(t *testing.T, c *client.Client, p *machinedProc) {
	before := servicePID(t, c, "trustd")
	bootBefore := bootID(t, c)

	resp, err := c.MachineClient.Reboot(ctx(t), &machine.RebootRequest{})
	if err != nil {
		t.Fatal(err)
	}

	actor := resp.GetMessages()[0].GetActorId()

	// talosctl opens its follow with a tail of 0 beside the call: one that
	// opens once the call is answered still sees the stop.
	if !followSeesStop(t, c, actor) {
		t.Fatalf("a follow opened once Reboot answered (actor %q) never saw the stopAllServices task", actor)
	}

	deadline := time.Now().Add(timeout)

	for {
		if list, err := c.ServiceList(ctx(t)); err == nil && allRunning(list) && servicePID(t, c, "trustd") != before {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("node did not come back from reboot:\n%s", p.out.String())
		}

		time.Sleep(100 * time.Millisecond)
	}

	// What talosctl reboot --wait waits for.
	if after := bootID(t, c); after == bootBefore {
		t.Fatalf("boot ID %s unchanged by the reboot", after)
	}

	evCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// talosctl's reboot, shutdown and reset --wait follow the actor's
	// events until Talos's stopAllServices task.
	var stopped, booted bool

	err = c.EventsWatch(evCtx, func(ch <-chan client.Event) {
		for ev := range ch {
			if ev.ActorID != actor {
				continue
			}

			switch p := ev.Payload.(type) {
			case *machine.TaskEvent:
				stopped = stopped || p.GetTask() == "stopAllServices"
			case *machine.SequenceEvent:
				booted = booted || p.GetSequence() == "boot"
			}

			if stopped && booted {
				cancel()
			}
		}
	}, client.WithTailEvents(-1))
	if err != nil || !stopped || !booted {
		t.Fatalf("events with actor %q: stopAllServices task %v, boot sequence %v (%v)", actor, stopped, booted, err)
	}
}

// followSeesStop follows the node's new events (a tail of 0, as talosctl)
// until the stopAllServices task of actor, or the end of the follow.
func followSeesStop(t *testing.T, c *client.Client, actor string) bool {
	t.Helper()

	evCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	events := make(chan client.EventResult)
	if err := c.EventsWatchV2(evCtx, events, client.WithTailEvents(0)); err != nil {
		t.Fatalf("following events: %v", err)
	}

	for {
		select {
		case ev := <-events:
			if ev.Error != nil {
				return false
			}

			if p, ok := ev.Event.Payload.(*machine.TaskEvent); ok && ev.Event.ActorID == actor && p.GetTask() == "stopAllServices" {
				return true
			}
		case <-evCtx.Done():
			return false
		}
	}
}

// bootID reads the node's boot ID as talosctl reboot --wait does.
func bootID(t *testing.T, c *client.Client) string {
	t.Helper()

	r, err := c.Read(ctx(t), "/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	id, err := io.ReadAll(r)
	if err != nil || !regexp.MustCompile(`^[0-9a-f-]{36}\n$`).Match(id) {
		t.Fatalf("boot ID %q, %v", id, err)
	}

	return string(id)
}

func allRunning(list *machine.ServiceListResponse) bool {
	for _, s := range list.GetMessages()[0].GetServices() {
		if s.GetState() != "Running" || !s.GetHealth().GetHealthy() {
			return false
		}
	}

	return true
}

// checkShutdown shuts the worker down through the API: machined ends and
// leaves no process behind.
func checkShutdown(t *testing.T, c *client.Client, p *machinedProc, node string) {
	apidPID := servicePIDOn(t, c, node)

	if err := c.Shutdown(client.WithNode(ctx(t), node)); err != nil {
		t.Fatal(err)
	}

	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatal("machined did not exit after Shutdown")
	}

	if err := syscall.Kill(apidPID, 0); err == nil {
		t.Fatalf("apid %d still runs after shutdown", apidPID)
	}
}

func servicePIDOn(t *testing.T, c *client.Client, node string) int {
	t.Helper()

	list, err := c.ServiceList(client.WithNode(ctx(t), node))
	if err != nil {
		t.Fatal(err)
	}

	for _, e := range list.Messages[0].GetServices()[0].GetEvents().GetEvents() {
		if m := startedPID.FindStringSubmatch(e.GetMsg()); m != nil {
			var pid int
			fmt.Sscan(m[1], &pid) //nolint:errcheck // the pattern matched digits

			return pid
		}
	}

	t.Fatal("no apid process found")

	return 0
}

// TestMachinedTimeSync: a new control plane whose NTP server does not
// answer issues no certificate and starts no process: apid and trustd wait
// for the node's certificates, the certificates service for time sync, and
// the log says so. One with a real chronyd boots to ready.
func TestMachinedTimeSync(t *testing.T) {
	needBinaries(t)

	dir, err := os.MkdirTemp("", "aegis-t")
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { os.RemoveAll(dir) })

	cpCfg, _ := genConfigs(t, dir)

	setServers := func(servers ...string) {
		cfg, err := certs.LoadMachineConfig(cpCfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}

		cfg.Machine.Time = certs.TimeSpec{Servers: servers}
		if err = cfg.Save(cpCfg, true); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing answers on this port: the node must not issue a certificate.
	silentNTP := net.JoinHostPort("127.0.3.11", strconv.Itoa(freePort(t, "udp", "127.0.3.11")))
	setServers(silentNTP)

	silent := startMachined(t, cpCfg, filepath.Join(dir, "silent"))
	waitLog(t, silent, `"msg":"waiting for time sync","servers":["`+silentNTP+`"],"before":"issuing node certificates"`)
	waitLog(t, silent, `"service":"apid","state":"Waiting","message":"waiting for node certificates"`)
	waitLog(t, silent, `"service":"trustd","state":"Waiting","message":"waiting for node certificates"`)
	time.Sleep(2 * time.Second) // a node that wrongly went on would have started its processes by now

	if out := silent.out.String(); strings.Contains(out, "process ") || strings.Contains(out, "using held node certificate") {
		t.Fatalf("node went past an unsynced clock:\n%s", out)
	}

	if entries, err := os.ReadDir(filepath.Join(dir, "silent", "pki")); err == nil || len(entries) > 0 {
		t.Fatalf("node kept certificates issued with an unsynced clock: %v", entries)
	}

	_ = silent.cmd.Process.Signal(syscall.SIGTERM)
	<-silent.exited

	chrony := startChrony(t, "127.0.3.10")
	setServers(chrony.addr)

	start := time.Now()
	synced := startMachined(t, cpCfg, filepath.Join(dir, "synced"))
	synced.waitReady(t)
	t.Logf("control plane with NTP: start to all services up in %s", time.Since(start).Round(time.Millisecond))

	t.Run("time API against chronyd", func(t *testing.T) {
		checkTimeWithNTP(t, talosClient(t, filepath.Join(dir, "aegisconfig")), chrony.addr)
	})
}

func waitLog(t *testing.T, p *machinedProc, text string) {
	t.Helper()

	deadline := time.Now().Add(timeout)

	for !strings.Contains(p.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in:\n%s", text, p.out.String())
		}

		time.Sleep(20 * time.Millisecond)
	}
}
