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
}

func (p *processService) ID() string          { return p.id }
func (p *processService) DependsOn() []string { return p.deps }

func (p *processService) Runner() (runner.Runner, error) {
	return runner.Restart(
		runner.Process(runner.ProcessConfig{Path: p.path, Args: p.allArgs(), Log: p.log, Clock: p.clock}),
		runner.RestartConfig{Policy: runner.Forever, Clock: p.clock},
	), nil
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

func (p *processService) Condition() system.Condition { return p.condition }

func (p *processService) AllowAPI(a system.Action) error {
	if reason, refused := p.refuse[a]; refused {
		return errors.New(reason)
	}

	return nil
}

// dialCheck is healthy when addr accepts TCP connections.
func dialCheck(addr string) health.Check {
	return func(ctx context.Context) error {
		var d net.Dialer

		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}

		return conn.Close()
	}
}

// grpcHealthCheck is healthy when the gRPC health service at addr, reached
// over TLS verified against roots(), reports SERVING.
func grpcHealthCheck(addr, serverName string, roots func() *x509.CertPool) health.Check {
	return func(ctx context.Context) error {
		creds := credentials.NewTLS(&tls.Config{RootCAs: roots(), ServerName: serverName, MinVersion: tls.VersionTLS13})

		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
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
