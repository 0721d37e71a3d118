// Package system is machined's service framework: services with
// dependencies, start conditions, runners, health checks and pre/post steps,
// run through their lifecycle by a Manager that reports every change as an
// event.
package system

import (
	"context"
	"errors"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// Service is the one thing every service provides. Optional capabilities
// are the interfaces below, detected by type assertion.
type Service interface {
	// ID names the service, e.g. "apid".
	ID() string
	// DependsOn lists the services that must be up before this one starts.
	DependsOn() []string
	// Runner builds the runner for one start; a restart gets a fresh one.
	Runner() (runner.Runner, error)
}

// HealthChecker is a service with a health check; it is up only when healthy.
type HealthChecker interface {
	HealthCheck() (health.Check, health.Settings)
}

// Conditioner is a service that may start only once a condition holds
// (time synced, node certificates present, …).
type Conditioner interface {
	Condition() Condition
}

// PreStarter is a service with a step to run before each start.
type PreStarter interface {
	PreStart(ctx context.Context) error
}

// PostStopper is a service with a step to run after each stop.
type PostStopper interface {
	PostStop(ctx context.Context) error
}

// Action is a lifecycle operation requested through the API.
type Action string

// API actions.
const (
	ActionStart   Action = "start"
	ActionStop    Action = "stop"
	ActionRestart Action = "restart"
)

// APIControlled is a service that may be started, stopped or restarted
// through the API. AllowAPI returns nil to allow action, or the reason it is
// refused. A service without it refuses every action.
type APIControlled interface {
	AllowAPI(action Action) error
}

// APICarrier is a service that carries the very API calls that control it,
// as apid does: stopping it ends the call that asked. Its restart through
// the API is answered first and runs after the answer.
type APICarrier interface {
	CarriesAPI() bool
}

// Condition is something that must hold before a service starts.
type Condition interface {
	// Wait returns nil once the condition holds, or ctx's error.
	Wait(ctx context.Context) error
	// String says what is awaited, for the Waiting state's message.
	String() string
}

// State is a step of a service's lifecycle.
type State int

// States, numbered as the Talos API's ServiceStateEvent actions.
const (
	StateInitialized State = iota
	StatePreparing
	StateWaiting
	StateRunning
	StateStopping
	StateFinished
	StateFailed
	StateSkipped
	StateStarting
)

func (s State) String() string {
	switch s {
	case StateInitialized:
		return "Initialized"
	case StatePreparing:
		return "Preparing"
	case StateWaiting:
		return "Waiting"
	case StateRunning:
		return "Running"
	case StateStopping:
		return "Stopping"
	case StateFinished:
		return "Finished"
	case StateFailed:
		return "Failed"
	case StateSkipped:
		return "Skipped"
	case StateStarting:
		return "Starting"
	default:
		return "Unknown"
	}
}

// Action returns the Talos API's name for the state.
func (s State) Action() machine.ServiceStateEvent_Action {
	return machine.ServiceStateEvent_Action(s)
}

// active reports whether a run is in progress (or being set up).
func (s State) active() bool {
	switch s {
	case StateInitialized, StateFinished, StateFailed, StateSkipped:
		return false
	default:
		return true
	}
}

// Errors of the Manager.
var (
	ErrUnknownService = errors.New("system: unknown service")
	ErrNotAllowed     = errors.New("system: action not allowed")
)
