package node

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/certapi"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/runner"
	"github.com/aegis-os/aegis/timesync"
)

var epoch = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// ntpSwitch answers NTP queries once it is on, as a server that comes back.
type ntpSwitch struct{ on atomic.Bool }

func (s *ntpSwitch) query(_ context.Context, _ string, _ time.Duration) (*ntp.Response, error) {
	if !s.on.Load() {
		return nil, errors.New("connection refused")
	}

	return &ntp.Response{Stratum: 2, Version: 4, Time: epoch, ReferenceTime: epoch.Add(-time.Minute)}, nil
}

// stubAPI stands in for apid: it waits on the same condition and runs
// until stopped, without a process.
type stubAPI struct{ cond system.Condition }

func (stubAPI) ID() string                    { return "apid" }
func (stubAPI) DependsOn() []string           { return nil }
func (s stubAPI) Condition() system.Condition { return s.cond }
func (stubAPI) Runner() (runner.Runner, error) {
	return runner.Goroutine("apid", io.Discard, park), nil
}

func park(ctx context.Context, _ io.Writer) error { <-ctx.Done(); return nil }

// bootHarness is a control-plane node on a fake clock whose NTP server is
// down until the test turns it on. It runs the boot's certificates phase
// and the services that depend on time and certificates, without
// processes or sockets.
type bootHarness struct {
	t   *testing.T
	clk *clock.Fake
	ntp *ntpSwitch
	log *logtest.Sink
	n   *Node
	cfg *certs.MachineConfig
	ctx context.Context
}

// newBootHarness makes a node with its state in state and config cfg
// (nil: a new cluster's control-plane config).
func newBootHarness(t *testing.T, state string, cfg *certs.MachineConfig) *bootHarness {
	t.Helper()

	h := &bootHarness{t: t, clk: clock.NewFake(epoch), ntp: &ntpSwitch{}, log: &logtest.Sink{}, cfg: cfg}
	if h.cfg == nil {
		h.cfg = controlPlaneConfig(t, h.clk)
	}

	var err error

	h.n, err = New(Config{Machine: h.cfg, State: state, BinDir: t.TempDir(), Clock: h.clk, Logger: h.log.Logger()})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(h.n.closeLogs)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h.ctx = ctx

	t.Cleanup(cancel)

	return h
}

func controlPlaneConfig(t *testing.T, clk *clock.Fake) *certs.MachineConfig {
	t.Helper()

	bundle, err := certs.GenerateBundle(certs.BundleOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.GenerateMachineConfig(bundle, certs.NodeControlPlane, certs.ConfigOptions{
		ClusterName: "t", Endpoint: "127.9.0.2", TimeServers: []string{"ntp.test"}, Hostname: "cp-1", ListenAddress: "127.9.0.2",
	}, epoch)
	if err != nil {
		t.Fatal(err)
	}

	if err = cfg.Validate("config", epoch); err != nil {
		t.Fatal(err)
	}

	return cfg
}

// boot runs the config, time and certificates phases and starts the
// services, as the boot sequence does; everything stops when the test ends.
func (h *bootHarness) boot() {
	h.t.Helper()

	b := &bootState{cfg: h.cfg, hostname: "cp-1", addresses: []string{"127.9.0.2"}}

	svc, err := timesync.New(timesync.Config{
		Servers: b.cfg.Machine.Time.Servers, Query: h.ntp.query, Clock: h.clk, Logger: h.log.Logger(),
	})
	if err != nil {
		h.t.Fatal(err)
	}

	b.time = svc
	h.n.config.booted = b

	runCtx, stop := context.WithCancel(context.Background())

	var wg sync.WaitGroup

	wg.Go(func() { _ = svc.Run(runCtx) })
	h.t.Cleanup(func() {
		_ = h.n.services.Stop(context.Background())

		stop()
		wg.Wait()
	})

	if err = h.n.phaseCertificates(runCtx, b, &wg); err != nil {
		h.t.Fatal(err)
	}

	if !h.n.services.Loaded() {
		err = h.n.services.Load(stubAPI{certsPresent{store: h.n.store, impersonator: true}}, certService{h.n})
		if err != nil {
			h.t.Fatal(err)
		}
	}

	if err = h.n.services.Start(); err != nil {
		h.t.Fatal(err)
	}
}

// waitingTimers are the timers armed while the node waits for time sync:
// the time service's retry, the reminders of the certificates service and
// of etcd's certificates, and on a control plane the revocation list's
// wait for an etcd client (its certificate comes only after sync) and its
// pruning round. Counting fewer lets a test read the log before a reminder
// has written its line, or advance the clock before a reminder is armed.
const waitingTimers = 5

// waitTimers waits until n timers are armed.
func (h *bootHarness) waitTimers(n int) {
	h.t.Helper()

	if err := h.clk.WaitForTimers(h.ctx, n); err != nil {
		h.t.Fatalf("timers never armed: %v", err)
	}
}

// ntpBack turns the NTP server on and moves the clock past the time
// service's longest retry.
func (h *bootHarness) ntpBack() {
	h.ntp.on.Store(true)
	h.clk.Advance(timesync.DefaultRetryMax)
}

// state returns a service's state once it has reached want (or the
// state it is in when the wait times out), waiting on the event bus.
func (h *bootHarness) state(id string, want system.State) (system.State, string) {
	h.t.Helper()

	sub := h.n.bus.Subscribe(1)

	for {
		ev, err := sub.Next(h.ctx)
		if err != nil {
			break
		}

		if st, ok := ev.Payload.(*machine.ServiceStateEvent); ok && st.GetService() == id && st.GetAction() == want.Action() {
			break
		}
	}

	info, err := h.n.services.Info(id)
	if err != nil {
		h.t.Fatal(err)
	}

	return info.State, info.Message
}

func (h *bootHarness) serverSerial() string {
	res, _ := h.n.store.Current()
	if res.GetServer() == nil {
		return ""
	}

	cert, err := usableHeld(res.GetServer(), serverKind, h.clk.Now(), h.cfg.AcceptedCAs(), nil)
	if err != nil {
		h.t.Fatal(err)
	}

	return cert.SerialNumber.String()
}

// TestBootWithHeldCertificatesServesBeforeTimeSync: a node that holds
// usable certificates starts apid at once while its NTP server is down;
// the certificates service waits for time sync in state Waiting, naming the
// servers, and the machine status reports the unmet "time" condition. When
// NTP comes back the boot goes on without a restart, and the held
// certificates stay in use.
func TestBootWithHeldCertificatesServesBeforeTimeSync(t *testing.T) {
	state := t.TempDir()

	first := newBootHarness(t, state, nil)
	first.ntp.on.Store(true)
	first.boot()

	if err := first.n.services.WaitUp(first.ctx, "apid"); err != nil {
		t.Fatal(err)
	}

	held := first.serverSerial()

	if err := first.n.services.Stop(first.ctx); err != nil {
		t.Fatal(err)
	}

	// The same state directory, a new machined, NTP down.
	h := newBootHarness(t, state, first.cfg)
	h.boot()

	if err := h.n.services.WaitUp(h.ctx, "apid"); err != nil {
		t.Fatal(err)
	}

	h.waitTimers(waitingTimers)

	if st, msg := h.state(CertificatesService, system.StateWaiting); st != system.StateWaiting || msg != "waiting for time sync with NTP servers ntp.test" {
		t.Fatalf("certificates service: %s %q", st, msg)
	}

	if got := h.serverSerial(); got != held {
		t.Fatalf("server certificate %s in use, want the held %s", got, held)
	}

	if len(h.log.Find(t, "waiting for time sync", logkey.Before, "renewing node certificates")) != 1 {
		t.Fatalf("no log of the wait:\n%s", h.log.String())
	}

	checkUnmetTime(t, h.n, "waiting for time sync with NTP servers ntp.test")

	h.ntpBack()

	if st, msg := h.state(CertificatesService, system.StateRunning); st != system.StateRunning {
		t.Fatalf("certificates service after sync: %s %q", st, msg)
	}

	if got := h.serverSerial(); got != held {
		t.Fatalf("server certificate %s in use after sync, want the held %s", got, held)
	}

	checkUnmetTime(t, h.n, "")
}

// TestBootWithoutCertificatesWaitsForTimeSync: a fresh node with its NTP
// server down issues nothing and starts no apid; its log says what it
// waits for, again at each reminder. When NTP comes back it issues its
// certificates, keeps them in its state directory, and apid starts.
func TestBootWithoutCertificatesWaitsForTimeSync(t *testing.T) {
	h := newBootHarness(t, t.TempDir(), nil)
	h.boot()
	h.waitTimers(waitingTimers)

	if st, msg := h.state("apid", system.StateWaiting); st != system.StateWaiting || msg != "waiting for node certificates" {
		t.Fatalf("apid: %s %q", st, msg)
	}

	if st, msg := h.state(CertificatesService, system.StateWaiting); st != system.StateWaiting || !strings.Contains(msg, "time sync with NTP servers ntp.test") {
		t.Fatalf("certificates service: %s %q", st, msg)
	}

	waits := func() int {
		return len(h.log.Find(t, "waiting for time sync", logkey.Before, "issuing node certificates"))
	}
	if waits() != 1 {
		t.Fatalf("no log of the wait:\n%s", h.log.String())
	}

	// One reminder a timeWaitReminder, not one a round of the time service.
	h.clk.Advance(timeWaitReminder)
	h.waitTimers(waitingTimers)

	if waits() != 2 {
		t.Fatalf("%d logs of the wait after one reminder period:\n%s", waits(), h.log.String())
	}

	if h.serverSerial() != "" {
		t.Fatal("a certificate was issued before time sync")
	}

	if found, _ := filepath.Glob(filepath.Join(h.n.layout.EtcdDir(), "*", "*.crt")); len(found) > 0 {
		t.Fatalf("etcd certificates issued before time sync: %v", found)
	}

	if _, _, err := (clientIssuer{h.n}).ClientIssuer(); !errors.Is(err, certapi.ErrTimeNotSynced) {
		t.Fatalf("client certificates before time sync: %v", err)
	}

	h.ntpBack()

	if err := h.n.services.WaitUp(h.ctx, "apid"); err != nil {
		t.Fatal(err)
	}

	if _, _, err := (clientIssuer{h.n}).ClientIssuer(); err != nil {
		t.Fatalf("client certificates after time sync: %v", err)
	}

	for _, kind := range []string{"server", "impersonator"} {
		crt, key := h.n.layout.NodeCertificate(kind)
		for _, p := range []string{crt, key} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v", p, fi, err)
			}
		}
	}
}

// checkUnmetTime checks the last machine status on the bus: an unmet
// "time" condition with reason, or none when reason is empty.
func checkUnmetTime(t *testing.T, n *Node, reason string) {
	t.Helper()

	var last *machine.MachineStatusEvent

	for _, ev := range n.bus.Tail(-1) {
		if st, ok := ev.Payload.(*machine.MachineStatusEvent); ok {
			last = st
		}
	}

	unmet := last.GetStatus().GetUnmetConditions()

	switch {
	case reason == "" && len(unmet) != 0:
		t.Fatalf("unmet conditions after sync: %v", unmet)
	case reason != "" && (len(unmet) != 1 || unmet[0].GetName() != "time" || unmet[0].GetReason() != reason):
		t.Fatalf("unmet conditions %v, want time: %q", unmet, reason)
	}
}
