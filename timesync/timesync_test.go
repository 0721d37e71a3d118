package timesync_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/timesync"
)

// reply is one scripted answer of the fake query.
type reply struct {
	resp *ntp.Response
	err  error
}

// fakeNTP answers queries from a script, in order, and records who was asked.
type fakeNTP struct {
	mu      sync.Mutex
	script  []reply
	servers []string
}

func (f *fakeNTP) query(_ context.Context, server string, _ time.Duration) (*ntp.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.servers = append(f.servers, server)
	if len(f.script) == 0 {
		return nil, errors.New("script exhausted")
	}

	r := f.script[0]
	f.script = f.script[1:]

	return r.resp, r.err
}

func (f *fakeNTP) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()

	return slices.Clone(f.servers)
}

// valid is a reply that passes beevik/ntp's Validate.
func valid(offset, rtt time.Duration) reply {
	return reply{resp: &ntp.Response{
		ClockOffset:   offset,
		RTT:           rtt,
		Stratum:       2,
		Version:       4,
		Time:          testutil.Epoch,
		ReferenceTime: testutil.Epoch.Add(-time.Minute),
	}}
}

func modified(r reply, change func(*ntp.Response)) reply {
	change(r.resp)

	return r
}

// harness runs a Service on a fake clock and steps it one round at a time.
type harness struct {
	t     *testing.T
	clk   *clock.Fake
	ntp   *fakeNTP
	svc   *timesync.Service
	calls int
}

func start(t *testing.T, servers []string, script ...reply) *harness {
	t.Helper()

	h := &harness{t: t, clk: clock.NewFake(testutil.Epoch), ntp: &fakeNTP{script: script}}

	svc, err := timesync.New(timesync.Config{
		Servers:   servers,
		MaxOffset: 100 * time.Millisecond,
		Query:     h.ntp.query,
		Clock:     h.clk,
		Rand:      testutil.ZeroRand{},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}

	h.svc = svc

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		_ = svc.Run(ctx)
	}()

	t.Cleanup(func() { cancel(); <-done })
	h.waitRound()

	return h
}

// waitRound waits until the service has finished a round and armed its
// timer for the next one.
func (h *harness) waitRound() {
	h.t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := h.clk.WaitForTimers(ctx, 1); err != nil {
		h.t.Fatalf("service never armed its timer: %v", err)
	}
}

// next advances the clock by d, which must fire the pending timer, and waits
// for the round that follows.
func (h *harness) next(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	h.waitRound()
}

func TestGateTransitions(t *testing.T) {
	h := start(t, []string{"ntp-a"},
		reply{err: errors.New("timeout")},                // stays closed
		valid(20*time.Millisecond, 10*time.Millisecond),  // opens
		valid(-90*time.Millisecond, 30*time.Millisecond), // 90+15 > 100: closes
		reply{err: errors.New("timeout")},                // stays closed
		valid(-50*time.Millisecond, 2*time.Millisecond),  // opens
		reply{err: errors.New("unreachable")},            // stays open
		valid(2*time.Second, time.Millisecond),           // closes
	)

	steps := []struct {
		wait time.Duration // before the round
		want bool
	}{
		{0, false},
		{500 * time.Millisecond, true}, // first retry: half of RetryMin without jitter
		{timesync.DefaultPollInterval, false},
		{500 * time.Millisecond, false},
		{time.Second, true}, // the second retry in a row waits a full step
		{timesync.DefaultPollInterval, true},
		{500 * time.Millisecond, false},
	}

	for i, st := range steps {
		if i > 0 {
			changed := h.svc.Changed()
			before := h.svc.Synced()
			h.next(st.wait)

			if flipped := chanClosed(changed); flipped != (before != st.want) {
				t.Fatalf("step %d: Changed fired = %v, gate %v -> %v", i, flipped, before, st.want)
			}
		}

		if got := h.svc.Synced(); got != st.want {
			t.Fatalf("step %d: synced = %v, want %v (status %+v)", i, got, st.want, h.svc.Status())
		}
	}

	if n := len(h.ntp.asked()); n != len(steps) {
		t.Fatalf("%d queries, want %d", n, len(steps))
	}
}

func TestWaitsFullIntervalWhenSynced(t *testing.T) {
	h := start(t, []string{"ntp-a"}, valid(0, time.Millisecond), valid(0, time.Millisecond))

	h.clk.Advance(timesync.DefaultPollInterval - time.Nanosecond)

	if n := len(h.ntp.asked()); n != 1 {
		t.Fatalf("queried %d times before the poll interval passed", n)
	}

	h.next(time.Nanosecond)

	if n := len(h.ntp.asked()); n != 2 {
		t.Fatalf("queried %d times after the poll interval", n)
	}
}

func TestFallsBackToNextServer(t *testing.T) {
	h := start(t, []string{"ntp-a", "ntp-b:1123", "ntp-c"},
		reply{err: errors.New("timeout")},
		valid(time.Millisecond, time.Millisecond),
	)

	if !h.svc.Synced() {
		t.Fatalf("not synced: %+v", h.svc.Status())
	}

	if got := h.ntp.asked(); !slices.Equal(got, []string{"ntp-a", "ntp-b:1123"}) {
		t.Fatalf("asked %v", got)
	}

	if st := h.svc.Status(); st.Server != "ntp-b:1123" || st.Offset != time.Millisecond {
		t.Fatalf("status = %+v", st)
	}
}

func TestInvalidRepliesAreIgnored(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
	}{
		{name: "kiss of death", reply: modified(valid(0, 0), func(r *ntp.Response) { r.Stratum = 0; r.KissCode = "RATE" })},
		{name: "unsynchronized stratum", reply: modified(valid(0, 0), func(r *ntp.Response) { r.Stratum = 16 })},
		{name: "leap not in sync", reply: modified(valid(0, 0), func(r *ntp.Response) { r.Leap = ntp.LeapNotInSync })},
		{name: "stale reference", reply: modified(valid(0, 0), func(r *ntp.Response) { r.ReferenceTime = testutil.Epoch.Add(-72 * time.Hour) })},
		{name: "huge dispersion", reply: modified(valid(0, 0), func(r *ntp.Response) { r.RootDispersion = time.Minute })},
		{name: "negative round trip", reply: valid(0, -time.Millisecond)},
		{name: "nil reply", reply: reply{}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, []string{"ntp-a"}, tt.reply)

			if h.svc.Synced() {
				t.Fatal("gate opened on an invalid reply")
			}

			if st := h.svc.Status(); st.LastError == nil {
				t.Fatalf("no error recorded: %+v", st)
			}
		})
	}
}

func TestTrustHostClock(t *testing.T) {
	svc, err := timesync.New(timesync.Config{TrustHostClock: true, Query: func(context.Context, string, time.Duration) (*ntp.Response, error) {
		t.Error("queried a server with a trusted host clock")

		return nil, errors.New("no")
	}})
	if err != nil {
		t.Fatal(err)
	}

	if !svc.Synced() {
		t.Fatal("gate closed with a trusted host clock")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusals(t *testing.T) {
	tests := []struct {
		name string
		cfg  timesync.Config
	}{
		{name: "nothing", cfg: timesync.Config{}},
		{name: "both", cfg: timesync.Config{Servers: []string{"a"}, TrustHostClock: true}},
		{name: "negative offset", cfg: timesync.Config{Servers: []string{"a"}, MaxOffset: -time.Second}},
		{name: "too many servers", cfg: timesync.Config{Servers: make([]string, timesync.MaxServers+1)}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := timesync.New(tt.cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

func TestGate(t *testing.T) {
	var g timesync.Gate

	ch := g.Changed()
	if g.Synced() || g.Set(false) || chanClosed(ch) {
		t.Fatal("zero gate is not closed and quiet")
	}

	if !g.Set(true) || !g.Synced() || !chanClosed(ch) {
		t.Fatal("opening did not notify")
	}

	ch = g.Changed()
	if g.Set(true) || chanClosed(ch) {
		t.Fatal("setting the same state notified")
	}
}

func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
