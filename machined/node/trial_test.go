package node

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/machineapi"
)

// triedConfig is cfg with other time servers: a change a TRY puts in
// effect live.
func triedConfig(t *testing.T, cfg *certs.MachineConfig) *certs.MachineConfig {
	t.Helper()

	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	tried, err := certs.ParseMachineConfig("tried", data, epoch)
	if err != nil {
		t.Fatal(err)
	}

	tried.Machine.Time.Servers = []string{"other.ntp.test"}

	return tried
}

// tryConfig puts tried in effect on trial for d, as ApplyConfig in mode
// TRY does.
func (h *bootHarness) tryConfig(tried *certs.MachineConfig, d time.Duration) {
	h.n.trials.mu.Lock()
	defer h.n.trials.mu.Unlock()

	changes, err := classify(h.n.config.current(), tried)
	if err != nil {
		h.t.Fatal(err)
	}

	h.n.startTrial(h.n.config.current(), d)
	h.n.applyLive(tried, changes)
}

func (h *bootHarness) rolledBack() bool {
	return len(h.log.Find(h.t, "trial machine config rolled back")) > 0
}

// TestTrialRolledBackOnSchedule: a TRY config is rolled back to the one it
// replaced when its timeout ends, not before, by the goroutine Run starts.
func TestTrialRolledBackOnSchedule(t *testing.T) {
	h := newBootHarness(t, t.TempDir(), nil)
	tried := triedConfig(t, h.cfg)

	stop := h.n.startBackground(h.ctx)
	defer stop()

	h.tryConfig(tried, time.Minute)
	h.waitTimers(1)

	h.clk.Advance(time.Minute - time.Second)

	if h.n.config.current() != tried || h.rolledBack() {
		t.Fatal("the trial was rolled back before its timeout")
	}

	h.clk.Advance(time.Second)

	if err := h.log.Wait(h.ctx, h.rolledBack); err != nil {
		t.Fatalf("the trial was not rolled back at its timeout: %v", err)
	}

	if h.n.config.current() != h.cfg {
		t.Fatal("the config in effect is not the one the trial replaced")
	}
}

// TestTrialStopsWithRun: a trial still pending when Run returns leaves no
// goroutine and no timer behind, and is not rolled back afterwards (it was
// never written to the config file, so the next start does not apply it).
func TestTrialStopsWithRun(t *testing.T) {
	h := newBootHarness(t, t.TempDir(), nil)
	tried := triedConfig(t, h.cfg)

	stop := h.n.startBackground(h.ctx)

	h.tryConfig(tried, time.Minute)
	h.waitTimers(1)

	stop() // as Run does when it returns: it waits for the goroutines' end

	if p := h.clk.Pending(); p != 0 {
		t.Fatalf("%d timers still armed after Run's end", p)
	}

	h.clk.Advance(time.Hour)

	if h.n.config.current() != tried || h.rolledBack() {
		t.Fatal("a trial was rolled back after Run's end")
	}
}

// TestRollbackUnderRunContext: the rollback runs under the context of the
// loop Run started, not one of its own.
func TestRollbackUnderRunContext(t *testing.T) {
	h := newBootHarness(t, t.TempDir(), nil)

	type key struct{}

	ctx, cancel := context.WithCancel(context.WithValue(h.ctx, key{}, "run"))
	defer cancel()

	tr := newTrials()
	got := make(chan any, 1)
	done := make(chan struct{})

	go func() {
		defer close(done)
		tr.run(ctx, h.clk, func(ctx context.Context, _ *trial) { got <- ctx.Value(key{}) })
	}()

	latest(tr.armed, &trial{deadline: epoch.Add(time.Minute)})
	h.waitTimers(1)
	h.clk.Advance(time.Minute)

	if v := <-got; v != "run" {
		t.Fatalf("rollback context carries %v, want Run's", v)
	}

	cancel()
	<-done
}

// TestRunStopsPendingTrial: Run, ended while a trial is pending, leaves no
// goroutine of the trial behind, and the trial is not rolled back later.
func TestRunStopsPendingTrial(t *testing.T) {
	clk := clock.NewFake(epoch)
	sink := &logtest.Sink{}

	cfg := controlPlaneConfig(t, clk)
	cfg.Machine.Time.Servers = []string{"127.0.0.1"} // refused at once: the clock never syncs

	n, err := New(Config{Machine: cfg, State: t.TempDir(), BinDir: t.TempDir(), Clock: clk, Logger: sink.Logger()})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)

	go func() { ended <- n.Run(runCtx) }()

	if err := sink.Wait(ctx, func() bool { return len(sink.Find(t, "boot phase", logkey.Phase, "services")) > 0 }); err != nil {
		t.Fatalf("the boot never reached its services: %v", err)
	}

	tried := triedConfig(t, cfg)

	data, err := tried.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	ch := machineapi.ConfigChange{Data: data, Mode: machine.ApplyConfigurationRequest_TRY, TryTimeout: time.Minute}
	if _, err := n.ApplyConfig(ctx, ch); err != nil {
		t.Fatal(err)
	}

	stop()

	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return")
	}

	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*trials).run") {
		t.Fatalf("the trial's goroutine outlived Run:\n%s", stacks)
	}

	clk.Advance(time.Hour)

	if len(sink.Find(t, "trial machine config rolled back")) > 0 {
		t.Fatal("a trial was rolled back after Run returned")
	}
}
