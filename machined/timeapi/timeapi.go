// Package timeapi implements the Talos TimeService for a node: the node's
// NTP view from its time service (`talosctl time`).
package timeapi

import (
	"context"
	"slices"
	"time"

	"github.com/beevik/ntp"
	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/defaults"
)

// TimeSource is the node's time service of the current boot
// (timesync.Service, which the node wires in). It is declared here, in
// plain values, so that this package imports no other component.
type TimeSource interface {
	// LastMeasurement is the last valid reply's server and offset, and
	// when its round ended (zero before any server answered).
	LastMeasurement() (server string, offset time.Duration, checked time.Time)
	Servers() []string
	TrustHostClock() bool
	Query(ctx context.Context, server string) (*ntp.Response, error)
}

// Config configures a Server. Source is required.
type Config struct {
	// Source returns the time service, or nil before the boot started one.
	Source func() TimeSource
	// Clock reads local time. Nil means the system clock.
	Clock interface{ Now() time.Time }
}

// Server implements timeapi.TimeServiceServer.
type Server struct {
	timeapi.UnimplementedTimeServiceServer

	cfg Config
}

// New returns a Server.
func New(cfg Config) *Server {
	cfg.Clock = defaults.Now(cfg.Clock)

	return &Server{cfg: cfg}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { timeapi.RegisterTimeServiceServer(g, s) }

func (s *Server) source() (TimeSource, error) {
	src := s.cfg.Source()
	if src == nil {
		return nil, status.Error(codes.Unavailable, "time: the node's time service has not started yet")
	}

	return src, nil
}

// Time is the node's last measurement: the server that answered it, local
// time now and the server's time as the measured offset gives it. With a
// trusted host clock nothing is measured: the server is empty and both
// times are the host's.
func (s *Server) Time(context.Context, *emptypb.Empty) (*timeapi.TimeResponse, error) {
	src, err := s.source()
	if err != nil {
		return nil, err
	}

	server, offset, checked := src.LastMeasurement()
	if !src.TrustHostClock() && checked.IsZero() {
		return nil, status.Error(codes.Unavailable, "time: no NTP server has answered yet")
	}

	now := s.cfg.Clock.Now()

	return reply(server, now, now.Add(offset)), nil
}

// TimeCheck asks one NTP server now. Only the node's own servers may be
// asked (the first one when none is named): the API never makes the node
// send packets to a host of the caller's choosing.
func (s *Server) TimeCheck(ctx context.Context, req *timeapi.TimeRequest) (*timeapi.TimeResponse, error) {
	src, err := s.source()
	if err != nil {
		return nil, err
	}

	servers := src.Servers()
	server := req.GetServer()

	switch {
	case len(servers) == 0:
		return nil, status.Error(codes.FailedPrecondition, "time: the node trusts its host clock and has no NTP servers to check")
	case server == "":
		server = servers[0]
	case !slices.Contains(servers, server):
		return nil, status.Errorf(codes.InvalidArgument, "time: %q is not one of the node's NTP servers %v", server, servers)
	}

	resp, err := src.Query(ctx, server)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "time: %s: %v", server, err)
	}

	now := s.cfg.Clock.Now()

	return reply(server, now, now.Add(resp.ClockOffset)), nil
}

func reply(server string, local, remote time.Time) *timeapi.TimeResponse {
	return &timeapi.TimeResponse{Messages: []*timeapi.Time{{
		Server:    server,
		Localtime: timestamppb.New(local), Remotetime: timestamppb.New(remote),
	}}}
}
