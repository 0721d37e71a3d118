package system

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/health"
)

// Limits of the framework.
const (
	// DefaultHistory is how many state changes each service keeps for
	// ServiceList; older ones remain on the node-wide bus while it holds them.
	DefaultHistory = 32
	// DefaultBusSize is how many events the node-wide bus keeps.
	DefaultBusSize = 1024
)

// Config configures a Manager. Every field may be left zero.
type Config struct {
	// Bus receives every state and health change. Nil means a new bus of DefaultBusSize.
	Bus *events.Bus
	// Clock stamps events and times health checks. Nil means the system clock.
	Clock clock.Clock
	// Logger gets one line per state change. Nil discards.
	Logger *slog.Logger
	// History is the per-service history length. Zero means DefaultHistory.
	History int
}

// Manager loads services and runs each through its lifecycle. It is safe
// for concurrent use.
type Manager struct {
	bus     *events.Bus
	clock   clock.Clock
	log     *slog.Logger
	history int

	mu       sync.Mutex
	services map[string]*instance
	changed  chan struct{} // closed and replaced on every state or health change

	pending     int        // restarts answered before they run (APICarrier), under mu
	pendingDone *sync.Cond // on mu: broadcast when pending drops to zero
}

// New returns an empty Manager.
func New(cfg Config) *Manager {
	cfg.Clock = defaults.Clock(cfg.Clock)

	if cfg.Bus == nil {
		cfg.Bus = events.NewBus(DefaultBusSize, cfg.Clock)
	}

	cfg.Logger = defaults.Logger(cfg.Logger)

	if cfg.History == 0 {
		cfg.History = DefaultHistory
	}

	m := &Manager{
		bus: cfg.Bus, clock: cfg.Clock, log: cfg.Logger, history: cfg.History,
		services: map[string]*instance{}, changed: make(chan struct{}),
	}
	m.pendingDone = sync.NewCond(&m.mu)

	return m
}

// Bus returns the event bus the Manager publishes to.
func (m *Manager) Bus() *events.Bus { return m.bus }

// Load adds services. It refuses, loading none of them, a duplicate ID, a
// dependency on an unknown service, or a dependency cycle.
func (m *Manager) Load(svcs ...Service) error {
	m.mu.Lock()

	deps := map[string][]string{}
	for id, inst := range m.services {
		deps[id] = inst.svc.DependsOn()
	}

	for _, svc := range svcs {
		if _, dup := deps[svc.ID()]; dup {
			m.mu.Unlock()

			return fmt.Errorf("system: service %q loaded twice", svc.ID())
		}

		deps[svc.ID()] = svc.DependsOn()
	}

	if err := checkGraph(deps); err != nil {
		m.mu.Unlock()

		return err
	}

	added := make([]*instance, 0, len(svcs))

	for _, svc := range svcs {
		inst := &instance{svc: svc, m: m}
		m.services[svc.ID()] = inst
		added = append(added, inst)
	}

	m.mu.Unlock()

	for _, inst := range added {
		inst.record(StateInitialized, "loaded")
	}

	return nil
}

// Loaded reports whether any service is loaded.
func (m *Manager) Loaded() bool {
	m.mu.Lock()
	defer m.mu.Unlock()

	return len(m.services) > 0
}

// Start starts the services (all loaded ones when ids is empty). Each waits
// for its dependencies and conditions on its own; Start does not wait.
func (m *Manager) Start(ids ...string) error {
	insts, err := m.lookup(ids)
	if err != nil {
		return err
	}

	for _, inst := range insts {
		inst.start()
	}

	return nil
}

// Stop stops the services (all loaded ones when ids is empty), dependents
// before their dependencies, and waits for them or for ctx. Stopping all
// first waits for any restart the API answered before running it (each is
// bounded by its runner's grace period), so that such a restart cannot
// start its service again behind Stop's back.
func (m *Manager) Stop(ctx context.Context, ids ...string) error {
	insts, err := m.lookup(ids)
	if err != nil {
		return err
	}

	if len(ids) == 0 {
		m.mu.Lock()
		for m.pending > 0 {
			m.pendingDone.Wait()
		}
		m.mu.Unlock()
	}

	wanted := map[string]bool{}
	for _, inst := range insts {
		wanted[inst.svc.ID()] = true
	}

	order := m.order()
	slices.Reverse(order)

	for _, id := range order {
		if wanted[id] {
			if err := m.get(id).stop(ctx); err != nil {
				return err
			}
		}
	}

	return nil
}

// Restart stops a service and starts it again.
func (m *Manager) Restart(ctx context.Context, id string) error {
	if err := m.Stop(ctx, id); err != nil {
		return err
	}

	return m.Start(id)
}

// API runs an action requested through the API, if the service allows it.
// It returns once the action is done, except a restart of an APICarrier:
// that is checked, begun in the background and reported with later set,
// since the service could not carry the answer once it stops.
func (m *Manager) API(ctx context.Context, id string, action Action) (later bool, err error) {
	insts, err := m.lookup([]string{id})
	if err != nil {
		return false, err
	}

	svc := insts[0].svc

	ctl, ok := svc.(APIControlled)
	if !ok {
		return false, fmt.Errorf("%w: %s cannot be controlled through the API", ErrNotAllowed, id)
	}

	if err := ctl.AllowAPI(action); err != nil {
		return false, fmt.Errorf("%w: %s %s: %w", ErrNotAllowed, action, id, err)
	}

	switch action {
	case ActionStart:
		return false, m.Start(id)
	case ActionStop:
		return false, m.Stop(ctx, id)
	}

	// A restart runs to its end even if its caller goes away: a restart cut
	// short after its stop would leave the service stopped. The stop is
	// bounded by the runner's own grace period.
	ctx = context.WithoutCancel(ctx)

	if carrier, ok := svc.(APICarrier); ok && carrier.CarriesAPI() {
		m.mu.Lock()
		m.pending++
		m.mu.Unlock()

		go func() {
			if err := m.Restart(ctx, id); err != nil {
				m.log.Error("restart requested through the API", slog.String(logkey.ServiceID, id), slog.String(logkey.Error, err.Error()))
			}

			m.mu.Lock()
			if m.pending--; m.pending == 0 {
				m.pendingDone.Broadcast()
			}
			m.mu.Unlock()
		}()

		return true, nil
	}

	return false, m.Restart(ctx, id)
}

// WaitUp waits until every named service (all when ids is empty) is up:
// running and, if it has a health check, healthy.
func (m *Manager) WaitUp(ctx context.Context, ids ...string) error {
	insts, err := m.lookup(ids)
	if err != nil {
		return err
	}

	for {
		changed := m.changes()

		var down []string

		for _, inst := range insts {
			if info := inst.info(); !info.Up() {
				down = append(down, fmt.Sprintf("%s (%s: %s)", info.ID, info.State, info.Message))
			}
		}

		if len(down) == 0 {
			return nil
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("system: not up: %v: %w", down, ctx.Err())
		}
	}
}

// List describes every service, in start order.
func (m *Manager) List() []Info {
	var out []Info
	for _, id := range m.order() {
		out = append(out, m.get(id).info())
	}

	return out
}

// Info describes one service.
func (m *Manager) Info(id string) (Info, error) {
	insts, err := m.lookup([]string{id})
	if err != nil {
		return Info{}, err
	}

	return insts[0].info(), nil
}

func (m *Manager) lookup(ids []string) ([]*instance, error) {
	if len(ids) == 0 {
		ids = m.order()
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	out := make([]*instance, 0, len(ids))

	for _, id := range ids {
		inst, ok := m.services[id]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownService, id)
		}

		out = append(out, inst)
	}

	return out, nil
}

func (m *Manager) get(id string) *instance {
	m.mu.Lock()
	defer m.mu.Unlock()

	return m.services[id]
}

func (m *Manager) order() []string {
	m.mu.Lock()
	defer m.mu.Unlock()

	deps := map[string][]string{}
	for id, inst := range m.services {
		deps[id] = inst.svc.DependsOn()
	}

	return startOrder(deps)
}

// Changed returns a channel closed at the next state or health change of
// any service. Take it before calling List, so that a change in between is
// not missed.
func (m *Manager) Changed() <-chan struct{} { return m.changes() }

// changes returns a channel closed at the next state or health change. Take
// it before looking at the state, so that a change in between is not missed.
func (m *Manager) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()

	return m.changed
}

// broadcast wakes everyone waiting for a change.
func (m *Manager) broadcast() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// depsUp reports whether every dependency of svc is up, and names those that are not.
func (m *Manager) depsUp(svc Service) (bool, []string) {
	var waiting []string

	for _, d := range svc.DependsOn() {
		if !m.get(d).info().Up() {
			waiting = append(waiting, d)
		}
	}

	return len(waiting) == 0, waiting
}

// Info is a snapshot of a service.
type Info struct {
	ID      string
	State   State
	Message string
	// HasHealth is set for services with a health check; Health is then meaningful.
	HasHealth bool
	Health    health.Status
	// Restarts counts the times the service's run ended while running and
	// its restart policy started it again.
	Restarts int
	// Events is the recent history, oldest first.
	Events []HistoryEntry
}

// Up reports whether the service is running and, if checked, healthy.
func (i Info) Up() bool {
	return i.State == StateRunning && (!i.HasHealth || (!i.Health.Unknown && i.Health.Healthy))
}

// HistoryEntry is one state change in a service's history.
type HistoryEntry struct {
	State   State
	Message string
	Time    time.Time
}
