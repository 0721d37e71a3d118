package apid

import (
	"context"
	"log/slog"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/healthprobe"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/source"
	"github.com/aegis-os/aegis/internal/wire"
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

// RegisterHealth serves apid's health service on r as well, with the same
// statuses: the node's supervisor probes it on a local socket
// (--health-socket), where it needs none of the listener's connection
// slots, which a flood of anonymous callers may hold.
func (s *Server) RegisterHealth(r grpc.ServiceRegistrar) {
	healthpb.RegisterHealthServer(r, s.health)
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

		s.log.Debug("machined health watch ended", slog.String(logkey.Error, err.Error()))

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

// msgNoCertificate is the record of a call refused for want of a client
// certificate; it goes through the handshake refusals' aggregator (kind
// "no certificate"), so a client without one that floods calls writes a
// bounded log, as a flood of refused handshakes does.
const msgNoCertificate = "call without a client certificate refused"

// errNoCertificate answers such a call.
var errNoCertificate = status.Error(codes.Unauthenticated,
	"apid: a client certificate is required (only grpc.health.v1 is served without one)")

// tap refuses, before any handler or interceptor, every call but a health
// probe on a connection whose client sent no certificate. The
// authentication interceptor would refuse it as well; refusing here keeps
// its record in the aggregator.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName == healthpb.Health_Watch_FullMethodName {
		// A Watch holds a stream open as long as its caller likes, and the
		// health service answers callers without a certificate outside the
		// stream caps: probes poll Check, as trustd's callers do.
		return ctx, status.Error(codes.Unimplemented, "apid: health Watch is not served; poll Check")
	}

	if healthprobe.IsHealth(info.FullMethodName) {
		if len(info.Header.Get(wire.MetadataNode)) > 0 || len(info.Header.Get(wire.MetadataNodes)) > 0 {
			return ctx, status.Error(codes.InvalidArgument, "apid: the health service answers for this node only; node and nodes are not taken")
		}

		return ctx, nil
	}

	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx, errNoCertificate
	}

	if tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(tlsInfo.State.PeerCertificates) > 0 {
		return ctx, nil
	}

	s.handshakes.Count(handshakeReason(kindNoCertificate))
	s.refusals.Refuse(ctx, source.Key(source.Addr(p.Addr)), kindNoCertificate, msgNoCertificate,
		slog.String(logkey.Peer, p.Addr.String()), slog.String(logkey.Method, info.FullMethodName))

	return ctx, errNoCertificate
}
