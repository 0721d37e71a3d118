package node

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
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
