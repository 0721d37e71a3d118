package trustd

import (
	"context"
	"log/slog"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/internal/logkey"
)

// watchTimeGate keeps the health status in step with the time gate until
// ctx ends.
func (s *Server) watchTimeGate(ctx context.Context) {
	last := false

	for {
		// Take the channel first, so a change between the two reads
		// still wakes the loop.
		changed := s.cfg.TimeGate.Changed()
		synced := s.cfg.TimeGate.Synced()

		if synced != last {
			s.setHealth(synced)
			s.cfg.Logger.Info("time gate changed", slog.Bool(logkey.Synced, synced))
			last = synced
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// RegisterHealth serves the health service of trustd's listener on r as
// well, with the same statuses: the node's supervisor probes it on a local
// socket, where it needs none of the listener's connection slots, which a
// flood of anonymous callers may hold.
func (s *Server) RegisterHealth(r grpc.ServiceRegistrar) {
	healthpb.RegisterHealthServer(r, s.health)
}

// setHealth reports the server as a whole ("") and SecurityService alike:
// a node that may not sign serves nothing useful.
func (s *Server) setHealth(synced bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if synced {
		st = healthpb.HealthCheckResponse_SERVING
	}

	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(securityapi.SecurityService_ServiceDesc.ServiceName, st)
}
