package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/grpcopt"
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

// grpcHealthCheck is healthy when the gRPC health service at addr, reached
// over TLS verified against roots(), reports SERVING. The probe is an
// anonymous caller, which a flood of anonymous callers may keep out (the
// service is then reported unhealthy, and the listener counts the probe
// against its source): it is made from serverName, the address probed,
// so that it counts against the node's own address and never against
// another client of the same host, such as an operator's aegisctl on
// 127.0.0.1.
func grpcHealthCheck(addr, serverName string, roots func() *x509.CertPool) health.Check {
	dialer := &net.Dialer{}
	if ip := net.ParseIP(serverName); ip != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}

	dial := func(ctx context.Context, target string) (net.Conn, error) {
		return dialer.DialContext(ctx, "tcp", target)
	}

	return func(ctx context.Context) error {
		creds := credentials.NewTLS(&tls.Config{RootCAs: roots(), ServerName: serverName, MinVersion: tls.VersionTLS13})

		conn, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{
			grpc.WithTransportCredentials(creds), grpc.WithContextDialer(dial),
		}, grpcopt.FixedWindows()...)...)
		if err != nil {
			return err
		}
		defer conn.Close() //nolint:errcheck // health probe connection

		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}

		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s", resp.GetStatus())
		}

		return nil
	}
}
