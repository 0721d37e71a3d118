package trustd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/connlimit"
	"github.com/aegis-os/aegis/internal/grpcrecover"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/refusals"
)

// certificateMethod is the full gRPC name of the one method trustd serves.
const certificateMethod = securityapi.SecurityService_Certificate_FullMethodName

// Server is trustd: a gRPC server over server-authenticated TLS offering
// SecurityService/Certificate and the gRPC health service, which reports
// NOT_SERVING while the time gate is closed.
type Server struct {
	cfg      Config
	limiter  *failureLimiter
	refusals *refusals.Aggregator
	// watchers counts the nodes' revocation Watch streams; stopping,
	// closed when the server stops, ends them.
	watchers watchers
	stopping chan struct{}
	conns    *connlimit.Limiter
	health   *health.Server
	grpc     *grpc.Server
	// decisions counts issuances and refusals for the metrics.
	decisions decisions
	// handshakes counts refused TLS handshakes; nil without metrics.
	handshakes *metrics.HandshakeRefusalCounter
	// reservedCache keeps the reserved set between requests.
	reservedCache reservedCache
}

// New checks cfg and builds a server; Serve starts it.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}

	cfg.setDefaults()

	s := &Server{
		cfg:     cfg,
		limiter: newFailureLimiter(cfg.RateLimit, cfg.Clock),
		refusals: refusals.New(refusals.Config{
			Logger: cfg.Refusals, Summary: MsgRefusals, Clock: cfg.Clock,
			Interval: RefusalInterval, MaxSources: MaxRefusalSources,
		}),
		health:    health.NewServer(),
		decisions: newDecisions(),
		stopping:  make(chan struct{}),
	}

	conns, err := connlimit.New(connlimit.Config{
		PerSource: MaxConnectionsPerSource, Total: MaxConnections, FirstCall: FirstCallTimeout,
		SlotWait: SlotWait, MaxWaiting: MaxWaiting,
		ProvenTotal: MaxNodeConnections, ProvenPerSource: MaxNodeConnectionsPerSource, HandshakeRoom: HandshakeRoom,
		MaxHandshakes: MaxHandshakes, Logger: cfg.Logger, Clock: cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("trustd: %w", err)
	}

	s.conns = conns
	s.setHealth(false)

	calls, err := metrics.NewGRPC(cfg.Metrics, metrics.GRPCConfig{})
	if err != nil {
		return nil, fmt.Errorf("trustd: %w", err)
	}

	// Counted from the first handshake: the credentials take it.
	if s.handshakes, err = metrics.NewHandshakeRefusals(cfg.Metrics, listenerName, reasonHandshake); err != nil {
		return nil, fmt.Errorf("trustd: %w", err)
	}

	// The metrics come first, so that a recovered panic counts as the
	// Internal its caller got.
	s.grpc = grpc.NewServer(append(calls.ServerOptions(), s.serverOptions()...)...)
	securityapi.RegisterSecurityServiceServer(s.grpc, service{s: s})
	healthpb.RegisterHealthServer(s.grpc, s.health)

	if cfg.Revocations != nil {
		revocations.RegisterNodeRevocationServiceServer(s.grpc, revocationService{s: s})
	}

	if cfg.Services != nil {
		cfg.Services(s.grpc)
	}

	if err = s.registerMetrics(cfg.Metrics); err != nil {
		return nil, fmt.Errorf("trustd: %w", err)
	}

	return s, nil
}

func (s *Server) serverOptions() []grpc.ServerOption {
	// Server authentication: a joining node has no certificate yet; its
	// token authenticates it. A client certificate is asked for but never
	// required nor trusted here: only the node services (the revocation
	// list's Serials, Config.Services) read it, and verify it themselves.
	// The certificate is fetched per handshake, so a renewed one needs no
	// restart.
	clientAuth := tls.NoClientCert
	if s.cfg.Revocations != nil || s.cfg.Services != nil {
		clientAuth = tls.RequestClientCert
	}

	tlsConfig := &tls.Config{
		GetCertificate: s.cfg.Certificate.GetCertificate,
		ClientAuth:     clientAuth,
		MinVersion:     tls.VersionTLS13,
	}

	// A panic in a handler answers Internal with a reference that is
	// also in the log line with the stack, and trustd goes on serving.
	recovered := grpcrecover.New(grpcrecover.Config{Component: "trustd", Logger: s.cfg.Logger, Rand: s.cfg.Rand})

	return append(recovered.ServerOptions(),
		grpc.Creds(s.conns.Credentials(countedCreds{TransportCredentials: credentials.NewTLS(tlsConfig), counted: s.handshakes}, s.provesNode)),
		grpc.MaxRecvMsgSize(MaxRequestSize),
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.ReadBufferSize(ReadBufferSize),
		grpc.WriteBufferSize(WriteBufferSize),
		grpc.StaticStreamWindowSize(WindowSize),
		grpc.StaticConnWindowSize(WindowSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: MaxIdle, Time: PingInterval, Timeout: PingTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval}),
		grpc.InTapHandle(s.tap),
		grpc.StatsHandler(auditStats{s: s}),
		grpc.StatsHandler(s.conns.StatsHandler()),
		grpc.StreamInterceptor(refuseStreams),
		grpc.NumStreamWorkers(StreamWorkers),
	)
}

// Serve accepts connections on lis, within the bounds of limits.go, until ctx ends, then stops gracefully:
// calls in flight get StopTimeout to finish. It returns nil after a stop
// through ctx and the listener's error otherwise. A Server serves once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	watched := make(chan struct{})

	go func() {
		defer close(watched)

		s.watchTimeGate(ctx)
	}()

	// The refusals are summarized until the last call has ended, and
	// once more then, so that none goes unrecorded at shutdown.
	summaryCtx, stopSummaries := context.WithCancel(context.WithoutCancel(ctx))
	summarized := make(chan struct{})

	go func() {
		defer close(summarized)

		s.refusals.Run(summaryCtx)
	}()

	served := make(chan error, 1)

	go func() { served <- s.grpc.Serve(s.conns.Wrap(lis)) }()

	s.cfg.Logger.Info("trustd serving", slog.String(logkey.Address, lis.Addr().String()))

	var err error

	select {
	case err = <-served:
		err = fmt.Errorf("trustd: serving: %w", err)
	case <-ctx.Done():
		s.stop()
		<-served
	}

	cancel()
	<-watched
	stopSummaries()
	<-summarized

	return err
}

// stop drains the server: health first, so probes see it leaving, then
// the revocation watches (Unavailable), then calls in flight, cut after StopTimeout.
func (s *Server) stop() {
	s.health.Shutdown()
	close(s.stopping) // the watches end now: their nodes move on at once

	drained := make(chan struct{})

	go func() {
		s.grpc.GracefulStop()
		close(drained)
	}()

	t := s.cfg.Clock.NewTimer(StopTimeout)
	defer t.Stop()

	select {
	case <-drained:
	case <-t.C():
		s.cfg.Logger.Warn("calls still running at stop; cutting them")
		s.grpc.Stop()
		<-drained
	}
}

// errStreaming is the answer to a streaming call.
var errStreaming = errors.New("trustd: streaming calls are not served")

// refuseStreams refuses every streaming call but the nodes' revocation
// Watch: trustd serves unary calls, each checked and audited once, and
// that one stream, which checks the node certificate itself and is bounded
// by MaxRevocationWatchers.
func refuseStreams(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == watchMethod {
		return handler(srv, ss)
	}

	return toStatus(errStreaming, "")
}
