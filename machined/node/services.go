package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// processService is a system service run as its own process from a binary,
// restarted forever with backoff.
type processService struct {
	id   string
	deps []string
	path string
	args []string
	// moreArgs, if set, adds the arguments that follow the machine config
	// of the current boot, read at each start: a reboot applies them.
	moreArgs func() []string
	log      *logs.Log
	clock    clock.Clock
	check    health.Check
	refuse   map[system.Action]string // actions the API may not take, with the reason
	// carriesAPI marks apid: the API calls that control it pass through it.
	carriesAPI bool
	// condition must hold before each start.
	condition system.Condition
	// env is the process's environment; nil means an empty one.
	env []string
	// files are given to the process at each start (see listenOn).
	files []runner.FileSource
	// container, if set, runs the service as a container instead.
	container *containerSpec
}

func (p *processService) ID() string          { return p.id }
func (p *processService) DependsOn() []string { return p.deps }

func (p *processService) Runner() (runner.Runner, error) {
	var r runner.Runner = runner.Process(runner.ProcessConfig{
		Path: p.path, Args: p.allArgs(), Env: p.env, Log: p.log, Clock: p.clock, Files: p.files,
	})
	if p.container != nil {
		r = p.container.runner(p)
	}

	return runner.Restart(r, runner.RestartConfig{Policy: runner.Forever, Clock: p.clock}), nil
}

// PreStart imports a container's image when containerd lacks it and gives
// the service's user its files.
func (p *processService) PreStart(ctx context.Context) error {
	if p.container == nil {
		return nil
	}

	return p.container.prepare(ctx)
}

// ContainerID is the ID of the service's container, empty for a process.
func (p *processService) ContainerID() string {
	if p.container == nil {
		return ""
	}

	return p.container.id
}

func (p *processService) allArgs() []string {
	if p.moreArgs == nil {
		return p.args
	}

	return append(slices.Clone(p.args), p.moreArgs()...)
}

func (p *processService) HealthCheck() (health.Check, health.Settings) {
	return p.check, health.Settings{InitialDelay: 100 * time.Millisecond, Period: 2 * time.Second}
}

func (p *processService) CarriesAPI() bool { return p.carriesAPI }

func (p *processService) Condition() system.Condition {
	if p.condition == nil {
		return noCondition{}
	}

	return p.condition
}

// noCondition always holds.
type noCondition struct{}

func (noCondition) Wait(context.Context) error { return nil }
func (noCondition) String() string             { return "nothing" }

func (p *processService) AllowAPI(a system.Action) error {
	if reason, refused := p.refuse[a]; refused {
		return errors.New(reason)
	}

	return nil
}

// localHealthCheck is healthy when the gRPC health service on the Unix
// socket at path (apid's --health-socket, trustd's token socket) reports
// SERVING ("": the service as a whole). On the service's TCP listener the
// probe would be an anonymous caller, which a flood of anonymous callers
// keeps out: the service would be reported down, and a version on trial
// rolled back, while it serves the cluster's own nodes and operators. The
// socket is the service's own (a dead one refuses the dial), so the check
// still fails whenever the process does not serve.
func localHealthCheck(path string) health.Check {
	return func(ctx context.Context) error {
		conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close() //nolint:errcheck // health probe connection

		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			// gRPC's text names the socket's path; the state says enough.
			return fmt.Errorf("its health service did not answer (%s)", status.Code(err))
		}

		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s", resp.GetStatus())
		}

		return nil
	}
}
