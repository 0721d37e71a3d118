package system

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// fakeService is a configurable service for the tests.
type fakeService struct {
	id      string
	deps    []string
	run     runner.Func
	healthy *atomic.Bool // nil: no health check
	allow   map[Action]bool
	started func(id string)
	carrier bool // carries the API calls that control it
}

func (f *fakeService) ID() string          { return f.id }
func (f *fakeService) DependsOn() []string { return f.deps }

func (f *fakeService) Runner() (runner.Runner, error) {
	fn := f.run
	if fn == nil {
		fn = func(ctx context.Context, _ io.Writer) error {
			<-ctx.Done()

			return nil
		}
	}

	// The framework builds the runner only once the dependencies are up,
	// so this records the order in which services were started.
	if f.started != nil {
		f.started(f.id)
	}

	return runner.Goroutine(f.id, io.Discard, fn), nil
}

func (f *fakeService) CarriesAPI() bool { return f.carrier }

func (f *fakeService) AllowAPI(a Action) error {
	if f.allow[a] {
		return nil
	}

	return errors.New("not for " + string(a))
}

type healthSvc struct{ *fakeService }

func (h healthSvc) HealthCheck() (health.Check, health.Settings) {
	return func(context.Context) error {
		if h.healthy.Load() {
			return nil
		}

		return errors.New("not ready")
	}, health.Settings{InitialDelay: time.Millisecond, Period: time.Second}
}

func newManager(clk clock.Clock) *Manager {
	return New(Config{Clock: clk, Bus: events.NewBus(4096, clk)})
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	return ctx
}

func TestLoadRefusesCyclesAndUnknownDeps(t *testing.T) {
	tests := []struct {
		name string
		svcs []Service
		want string
	}{
		{name: "cycle", svcs: []Service{
			&fakeService{id: "a", deps: []string{"c"}}, &fakeService{id: "b", deps: []string{"a"}}, &fakeService{id: "c", deps: []string{"b"}},
		}, want: "dependency cycle: a -> c -> b -> a"},
		{name: "self", svcs: []Service{&fakeService{id: "a", deps: []string{"a"}}}, want: "cycle: a -> a"},
		{name: "unknown", svcs: []Service{&fakeService{id: "a", deps: []string{"ghost"}}}, want: `unknown service "ghost"`},
		{name: "duplicate", svcs: []Service{&fakeService{id: "a"}, &fakeService{id: "a"}}, want: "loaded twice"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(clock.Real())

			err := m.Load(tt.svcs...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}

			if len(m.List()) != 0 {
				t.Fatal("a refused load left services behind")
			}
		})
	}
}

// TestDependencyOrder: c depends on b, b on a, and a is up only once its
// health check passes; the services start strictly in order.
func TestDependencyOrder(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
	)

	started := func(id string) {
		mu.Lock()
		order = append(order, id)
		mu.Unlock()
	}

	aHealthy := &atomic.Bool{}
	m := newManager(clock.Real())

	err := m.Load(
		&fakeService{id: "c", deps: []string{"b"}, started: started},
		healthSvc{&fakeService{id: "a", started: started, healthy: aHealthy}},
		&fakeService{id: "b", deps: []string{"a"}, started: started},
	)
	if err != nil {
		t.Fatal(err)
	}

	if err := m.Start(); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	waitState(t, m, "a", StateRunning)

	// b waits as long as a is unhealthy; it may take a moment to get there.
	if info := waitState(t, m, "b", StateWaiting); !strings.Contains(info.Message, "waiting for a") {
		t.Fatalf("b = %s %q, want waiting for a", info.State, info.Message)
	}

	if info, _ := m.Info("c"); info.State == StateRunning {
		t.Fatal("c runs before b")
	}

	aHealthy.Store(true)

	if err := m.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	got := strings.Join(order, ",")
	mu.Unlock()

	if got != "a,b,c" {
		t.Fatalf("start order = %s", got)
	}

	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	for _, info := range m.List() {
		if info.State != StateFinished {
			t.Fatalf("%s = %s after stop", info.ID, info.State)
		}
	}
}

// TestStopOrderIsReversed: dependents stop before their dependencies.
func TestStopOrderIsReversed(t *testing.T) {
	var (
		mu      sync.Mutex
		stopped []string
	)

	svc := func(id string, deps ...string) *fakeService {
		return &fakeService{id: id, deps: deps, run: func(ctx context.Context, _ io.Writer) error {
			<-ctx.Done()
			mu.Lock()
			stopped = append(stopped, id)
			mu.Unlock()

			return nil
		}}
	}

	m := newManager(clock.Real())
	if err := m.Load(svc("db"), svc("api", "db"), svc("web", "api")); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	_ = m.Start()
	if err := m.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}

	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	if got := strings.Join(stopped, ","); got != "web,api,db" {
		t.Fatalf("stop order = %s", got)
	}
}

// TestHealthFlipsProduceEvents: each change of the health result is one
// ServiceStateEvent on the bus, and a dependency going unhealthy is visible.
func TestHealthFlipsProduceEvents(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	healthy := &atomic.Bool{}
	healthy.Store(true)

	m := newManager(clk)
	if err := m.Load(healthSvc{&fakeService{id: "svc", healthy: healthy}}); err != nil {
		t.Fatal(err)
	}

	sub := m.Bus().Subscribe(m.Bus().NextSeq())
	ctx := waitCtx(t)

	_ = m.Start()

	var flips []bool

	for _, next := range []bool{false, true, false} {
		for {
			if err := clk.WaitForTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}

			if info, _ := m.Info("svc"); !info.Health.Unknown {
				break
			}

			clk.Advance(time.Second)
		}

		healthy.Store(next)
		clk.Advance(time.Second)
		waitHealth(t, m, "svc", next)
	}

	for len(flips) < 4 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}

		if sse, ok := ev.Payload.(*machine.ServiceStateEvent); ok && sse.Health != nil && !sse.Health.Unknown {
			flips = append(flips, sse.Health.Healthy)
		}
	}

	want := []bool{true, false, true, false}
	for i := range want {
		if flips[i] != want[i] {
			t.Fatalf("health events = %v, want %v", flips, want)
		}
	}
}

// TestSlowSubscriberDoesNotBlock: a subscriber that never reads does not
// hold up a busy node.
func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	clk := clock.Real()
	m := New(Config{Clock: clk, Bus: events.NewBus(16, clk)})
	_ = m.Bus().Subscribe(m.Bus().NextSeq()) // never read

	svcs := make([]Service, 0, 50)
	for i := range 50 {
		svcs = append(svcs, &fakeService{id: "s" + string(rune('A'+i%26)) + string(rune('a'+i/26))})
	}

	if err := m.Load(svcs...); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	_ = m.Start()
	if err := m.WaitUp(ctx); err != nil {
		t.Fatalf("node blocked: %v", err)
	}

	if err := m.Stop(ctx); err != nil {
		t.Fatalf("node blocked: %v", err)
	}
}

func TestFailureIsRecorded(t *testing.T) {
	m := newManager(clock.Real())
	if err := m.Load(&fakeService{id: "bad", run: func(context.Context, io.Writer) error { return errors.New("disk on fire") }}); err != nil {
		t.Fatal(err)
	}

	_ = m.Start()
	info := waitState(t, m, "bad", StateFailed)

	if !strings.Contains(info.Message, "disk on fire") {
		t.Fatalf("message = %q", info.Message)
	}

	var states []string
	for _, e := range info.Events {
		states = append(states, e.State.String())
	}

	if got := strings.Join(states, ","); got != "Initialized,Starting,Running,Failed" {
		t.Fatalf("history = %s", got)
	}
}

func TestAPIActions(t *testing.T) {
	m := newManager(clock.Real())
	if err := m.Load(&fakeService{id: "svc", allow: map[Action]bool{ActionRestart: true}}); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	_ = m.Start()
	waitState(t, m, "svc", StateRunning)

	if _, err := m.API(ctx, "svc", ActionStop); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "not for stop") {
		t.Fatalf("stop: %v", err)
	}

	if later, err := m.API(ctx, "svc", ActionRestart); err != nil || later {
		t.Fatalf("restart: later %v, %v", later, err)
	}

	waitState(t, m, "svc", StateRunning)

	if _, err := m.API(ctx, "ghost", ActionStart); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("unknown service: %v", err)
	}
}

// TestRestartOutlivesItsCaller: the caller of a restart may go away while
// the service stops (apid restarting itself ends the call); the service must
// still start again.
func TestRestartOutlivesItsCaller(t *testing.T) {
	var starts atomic.Int32

	stopping := make(chan struct{})
	release := make(chan struct{})

	svc := &fakeService{
		id: "svc", allow: map[Action]bool{ActionRestart: true},
		started: func(string) { starts.Add(1) },
		run: func(ctx context.Context, _ io.Writer) error {
			<-ctx.Done()

			if starts.Load() == 1 {
				close(stopping)
				<-release // a slow stop, during which the caller leaves
			}

			return nil
		},
	}

	m := newManager(clock.Real())
	if err := m.Load(svc); err != nil {
		t.Fatal(err)
	}

	_ = m.Start()
	waitState(t, m, "svc", StateRunning)

	callCtx, hangUp := context.WithCancel(waitCtx(t))
	done := make(chan error, 1)

	go func() {
		_, err := m.API(callCtx, "svc", ActionRestart)
		done <- err
	}()

	<-stopping
	hangUp()
	close(release)

	if err := <-done; err != nil {
		t.Fatalf("restart: %v", err)
	}

	waitState(t, m, "svc", StateRunning)

	if starts.Load() != 2 {
		t.Fatalf("service started %d times, want 2", starts.Load())
	}
}

// TestProcessServiceLifecycle runs a real child process through the framework.
func TestProcessServiceLifecycle(t *testing.T) {
	m := newManager(clock.Real())
	svc := &processService{id: "sleeper", path: "/bin/sleep", args: []string{"300"}}

	if err := m.Load(svc); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	_ = m.Start()
	if info := waitState(t, m, "sleeper", StateRunning); !strings.Contains(info.Message, "process ") {
		t.Fatalf("running message = %q", info.Message)
	}

	if err := m.Stop(ctx, "sleeper"); err != nil {
		t.Fatal(err)
	}

	if info, _ := m.Info("sleeper"); info.State != StateFinished {
		t.Fatalf("state after stop = %s", info.State)
	}
}

type processService struct {
	id, path string
	args     []string
}

func (p *processService) ID() string          { return p.id }
func (p *processService) DependsOn() []string { return nil }

func (p *processService) Runner() (runner.Runner, error) {
	return runner.Process(runner.ProcessConfig{Path: p.path, Args: p.args, GracePeriod: 5 * time.Second}), nil
}

func waitState(t *testing.T, m *Manager, id string, want State) Info {
	t.Helper()

	var info Info

	waitChange(t, m, func() (bool, string) {
		var err error
		if info, err = m.Info(id); err != nil {
			t.Fatal(err)
		}

		return info.State == want, fmt.Sprintf("%s is %s (%s), want %s", id, info.State, info.Message, want)
	})

	return info
}

func waitHealth(t *testing.T, m *Manager, id string, healthy bool) {
	t.Helper()

	waitChange(t, m, func() (bool, string) {
		info, _ := m.Info(id)

		return !info.Health.Unknown && info.Health.Healthy == healthy,
			fmt.Sprintf("%s health = %+v, want healthy=%v", id, info.Health, healthy)
	})
}

// waitChange waits until done holds, looking again at each change the
// Manager broadcasts; it fails with done's description if waitCtx ends first.
func waitChange(t *testing.T, m *Manager, done func() (bool, string)) {
	t.Helper()

	ctx := waitCtx(t)

	for {
		changed := m.changes()

		ok, what := done()
		if ok {
			return
		}

		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal(what)
		}
	}
}

// TestCarrierRestartIsAnsweredFirst: a service that carries the API (apid)
// is restarted after the call that asked has its answer, and stopping
// every service meanwhile waits for that restart instead of racing it.
func TestCarrierRestartIsAnsweredFirst(t *testing.T) {
	var starts atomic.Int32

	stopping := make(chan struct{})
	release := make(chan struct{})

	svc := &fakeService{
		id: "api", allow: map[Action]bool{ActionRestart: true}, carrier: true,
		started: func(string) { starts.Add(1) },
		run: func(ctx context.Context, _ io.Writer) error {
			<-ctx.Done()

			if starts.Load() == 1 {
				close(stopping)
				<-release // the stop outlasts the call that asked for it
			}

			return nil
		},
	}

	m := newManager(clock.Real())
	if err := m.Load(svc); err != nil {
		t.Fatal(err)
	}

	ctx := waitCtx(t)

	_ = m.Start()
	waitState(t, m, "api", StateRunning)

	later, err := m.API(ctx, "api", ActionRestart)
	if err != nil || !later {
		t.Fatalf("restart: later %v, %v; want it answered before it runs", later, err)
	}

	<-stopping // the answer came while the service was still up

	stopped := make(chan error, 1)

	go func() { stopped <- m.Stop(ctx) }()

	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) before the pending restart finished", err)
	case <-time.After(50 * time.Millisecond):
	}

	close(release)

	if err := <-stopped; err != nil {
		t.Fatal(err)
	}

	if n := starts.Load(); n != 2 {
		t.Fatalf("service started %d times, want 2 (once more by the restart)", n)
	}

	if info, _ := m.Info("api"); info.State != StateFinished {
		t.Fatalf("after Stop the service is %s, want it stopped", info.State)
	}
}

// restartingService exits its first runs at once; its restart policy
// starts it again.
type restartingService struct {
	fakeService
	exits int
	runs  atomic.Int32
}

func (r *restartingService) Runner() (runner.Runner, error) {
	inner := runner.Goroutine(r.id, io.Discard, func(ctx context.Context, _ io.Writer) error {
		if int(r.runs.Add(1)) <= r.exits {
			return errors.New("crashed")
		}

		<-ctx.Done()

		return nil
	})

	return runner.Restart(inner, runner.RestartConfig{Policy: runner.Forever, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}), nil
}

// Info counts the runs that ended while running and were restarted, not a
// start or a stop.
func TestRestartsAreCounted(t *testing.T) {
	m := newManager(clock.Real())
	svc := &restartingService{fakeService: fakeService{id: "flaky"}, exits: 2}

	if err := m.Load(svc); err != nil {
		t.Fatal(err)
	}

	_ = m.Start()

	waitChange(t, m, func() (bool, string) {
		info, _ := m.Info("flaky")

		return info.State == StateRunning && info.Restarts == 2, fmt.Sprintf("%s with %d restarts", info.State, info.Restarts)
	})

	if err := m.Stop(waitCtx(t)); err != nil {
		t.Fatal(err)
	}

	if info, _ := m.Info("flaky"); info.Restarts != 2 {
		t.Fatalf("after a stop: Restarts = %d, want 2", info.Restarts)
	}
}

// countingHandler counts the log records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}

	return nil
}

func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestWaitingIsRecordedOnce: services waiting on the same dependency
// record their wait once, not again each time another service's record
// wakes them (which made them wake each other in a loop, logging without
// end and spending the CPU a boot needs).
func TestWaitingIsRecordedOnce(t *testing.T) {
	records := &atomic.Int64{}
	m := New(Config{Clock: clock.Real(), Bus: events.NewBus(4096, clock.Real()),
		Logger: slog.New(countingHandler{msg: "service state", n: records})})

	aHealthy := &atomic.Bool{}

	err := m.Load(
		healthSvc{&fakeService{id: "a", healthy: aHealthy}},
		&fakeService{id: "b", deps: []string{"a"}},
		&fakeService{id: "c", deps: []string{"a"}},
		&fakeService{id: "d", deps: []string{"a"}},
	)
	if err != nil {
		t.Fatal(err)
	}

	if err := m.Start(); err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{"b", "c", "d"} {
		waitState(t, m, id, StateWaiting)
	}

	time.Sleep(200 * time.Millisecond) // the loop, when there is one, logs thousands of records in this time

	// a: loaded, waiting for nothing, starting, running; b, c, d: loaded
	// and one wait each. A few more for the order in which they start.
	if n := records.Load(); n > 16 {
		t.Fatalf("%d service state records while b, c and d wait for a, want at most 16", n)
	}

	aHealthy.Store(true)

	ctx := waitCtx(t)
	if err := m.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}

	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
