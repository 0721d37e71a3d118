package apid

import (
	"context"
	"log/slog"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
)

// apid's grpc.health.v1 service answers without a client certificate (see
// configForClient and interceptors), for supervisors and load balancers:
//   - "" (the server) is SERVING while apid reaches machined: a watch of
//     machined's own health service is open and has answered;
//   - "machine.MachineService" is what machined reports: SERVING once the
//     node's boot is ready, NOT_SERVING while it boots, waits for its clock,
//     reboots or shuts down, and whenever machined is out of reach.
//
// A load balancer that routes calls to a node probes "" or the service as
// it needs; the health service is the one thing served without a
// certificate, and it tells nothing but these two states.
func newHealth() *health.Server {
	h := health.NewServer()
	setHealth(h, false, healthpb.HealthCheckResponse_NOT_SERVING)

	return h
}

func setHealth(h *health.Server, reached bool, node healthpb.HealthCheckResponse_ServingStatus) {
	own := healthpb.HealthCheckResponse_NOT_SERVING
	if reached {
		own = healthpb.HealthCheckResponse_SERVING
	}

	h.SetServingStatus("", own)
	h.SetServingStatus(machine.MachineService_ServiceDesc.ServiceName, node)
}

// followMachined keeps the health service in step with machined's until
// ctx ends, watching again after a pause when the watch breaks.
func (s *Server) followMachined(ctx context.Context) {
	client := healthpb.NewHealthClient(s.local)
	bo := backoff.Backoff{Min: HealthRetryMin, Max: HealthRetryMax, Rand: s.rand}

	for {
		err := s.watchMachined(ctx, client, &bo)

		setHealth(s.health, false, healthpb.HealthCheckResponse_NOT_SERVING)

		if ctx.Err() != nil {
			return
		}

		s.log.Debug("machined health watch ended", slog.String(FieldError, err.Error()))

		if !clock.Sleep(ctx, s.clock, bo.Next()) {
			return
		}
	}
}

func (s *Server) watchMachined(ctx context.Context, client healthpb.HealthClient, bo *backoff.Backoff) error {
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}

	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}

		bo.Reset()
		setHealth(s.health, true, resp.GetStatus())
	}
}
