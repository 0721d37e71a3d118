package apid

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/connlimit"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/refusals"
	"github.com/aegis-os/aegis/internal/wire"
)

// CertificateSource serves the certificate apid presents to its clients.
// It is asked at every handshake, so a renewed certificate is used from the
// next connection on and open connections are not dropped. *certs.KeyPair
// is one.
type CertificateSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// ClientCertificateSource serves the client certificate apid presents to
// other nodes when it forwards a call. *certs.KeyPair is one.
type ClientCertificateSource interface {
	GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// Config configures a Server. New reads it once; changing it afterwards
// changes nothing. The sources it names are asked at every handshake.
type Config struct {
	// Certificate is apid's server certificate. Required.
	Certificate CertificateSource
	// AcceptedCAs returns the CAs that client certificates, and other
	// nodes' server certificates, must chain to. It is called at every
	// handshake, so a CA rotation needs no restart. Required; a nil set
	// refuses the handshake.
	AcceptedCAs func() *ca.AcceptedSet
	// ForwardCertificate is the node's os:impersonator client certificate,
	// used to forward calls to other nodes. Nil means the node forwards
	// nothing (a worker): it serves calls for itself and refuses the others
	// with PermissionDenied.
	ForwardCertificate ClientCertificateSource
	// MachinedSocket is the path of the local machined's Unix socket, where
	// calls for this node go, with the caller's roles in talos-role
	// metadata. Required.
	MachinedSocket string
	// Self lists the names and addresses by which clients may name this
	// node in `node`/`nodes`; such a target is served locally without a hop
	// through the network, however many spellings of it a call names. A
	// port on an entry (a listen address) is ignored. Empty means every
	// target is forwarded.
	Self []string
	// Names lists the configuration's control-plane endpoints (DNS names
	// or addresses; a port is ignored). Clients may name them in
	// `node`/`nodes`, and a node named so is taken for a control plane.
	Names []string
	// Members finds the cluster's live members, from the membership list
	// machined keeps; it is asked at every call. A target that is not
	// this node and not in Names must be a member's hostname or address.
	// Nil means no members are known.
	Members MemberResolver
	// Role is this node's role, from its own machine config
	// (RoleControlPlane or RoleWorker). "" means unknown: a call carrying
	// secrets is then refused here too (see secrets.go).
	Role string
	// NodePort is the port of every node's apid: targets carry no port.
	// Zero means wire.APIDPort (50000).
	NodePort int
	// Revocations is the cluster's list of revoked client certificates,
	// checked at every handshake and call and, when it changes, against
	// every open call. Nil revokes nothing.
	Revocations *Revocations
	// Rules is the method table. Nil means authz.DefaultRules().
	Rules authz.Rules
	// Logger receives the request log and the audit records. Nil discards.
	Logger *slog.Logger
	// RequestLogger receives the request log line of every call instead of
	// Logger, so that a command can let those lines wait a little and be
	// written together (cmd/apid: internal/logbuf). Nil means Logger.
	RequestLogger *slog.Logger
	// Metrics receives apid's collectors: gRPC calls by method and code,
	// connections and streams against their caps, certificate expiry. Nil
	// means no metrics.
	Metrics prometheus.Registerer
	// Clock is the time certificates are checked at. Nil means the system clock.
	Clock clock.Clock
	// Rand is the TLS handshakes' source of randomness. Nil means crypto/rand.
	Rand io.Reader
}

// Server is an apid instance: the TLS listener, the interceptor chain and
// the router. It is safe for concurrent use.
type Server struct {
	cert     CertificateSource
	accepted func() *ca.AcceptedSet
	revoked  *Revocations
	forward  ClientCertificateSource
	names    *nodeNames
	nodePort int
	log      *slog.Logger
	reqLog   *slog.Logger // the request log: Config.RequestLogger
	clock    clock.Clock
	rand     io.Reader
	pools    caPoolCache
	conns    *connlimit.Limiter
	grpc     *grpc.Server
	health   *health.Server // grpc.health.v1, following machined's (health.go)
	local    *grpc.ClientConn
	nodes    *pool
	refusals *refusals.Aggregator
	// handshakes counts the refused handshakes for the metrics; nil
	// without them.
	handshakes *metrics.HandshakeRefusalCounter
	streams    *streamGuard
	callOpts   []grpc.CallOption
	stopped    chan struct{} // closed once Stop or Shutdown has stopped gRPC
	stopOnce   sync.Once
}

// New builds a Server from cfg. It opens no socket: Serve does.
func New(cfg Config) (*Server, error) {
	if cfg.Certificate == nil || cfg.AcceptedCAs == nil || cfg.MachinedSocket == "" {
		return nil, errors.New("apid: Certificate, AcceptedCAs and MachinedSocket are required")
	}

	s := &Server{
		cert:     cfg.Certificate,
		accepted: cfg.AcceptedCAs,
		revoked:  cfg.Revocations,
		forward:  cfg.ForwardCertificate,
		nodePort: cfg.NodePort,
		log:      cfg.Logger,
		reqLog:   cfg.RequestLogger,
		clock:    cfg.Clock,
		rand:     cfg.Rand,
		callOpts: []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})},
		stopped:  make(chan struct{}),
	}
	s.defaults()

	conns, err := connlimit.New(connlimit.Config{
		PerSource: MaxConnectionsPerSource, Total: MaxConnections, FirstCall: FirstCallTimeout,
		SlotWait: SlotWait, MaxWaiting: MaxWaiting,
		ProvenTotal: MaxCertifiedConnections, ProvenPerSource: MaxConnectionsPerSource, HandshakeRoom: HandshakeRoom,
		MaxHandshakes: MaxHandshakes, Logger: s.log, Clock: s.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	s.conns = conns

	names, err := newNodeNames(s.nodePort, cfg.Self, cfg.Names)
	if err != nil {
		return nil, err
	}

	names.members = cfg.Members
	names.selfRole = cfg.Role

	s.names = names

	if s.local, err = dialLocal(cfg.MachinedSocket); err != nil {
		return nil, err
	}

	s.streams = newStreamGuard(s.clock, s.recheckClient, s.log)
	s.nodes = newPool(poolConfig{
		dial: s.dialNode, clock: s.clock, idle: PoolIdleTimeout, log: s.log,
		max: MaxPooledNodes, perCaller: MaxPooledNodesPerCaller, reserve: AdminPoolReserve,
		credential: s.forwardCredential,
	})
	rules := cfg.Rules
	if rules == nil {
		rules = authz.DefaultRules()
	}

	calls, err := metrics.NewGRPC(cfg.Metrics, metrics.GRPCConfig{Known: knownMethod(rules), Kind: methodKind})
	if err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	// Counted from the first handshake: the credentials take it.
	if s.handshakes, err = metrics.NewHandshakeRefusals(cfg.Metrics, listenerName, handshakeReasons()...); err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	s.grpc = s.newGRPCServer(rules, calls)
	s.health = newHealth()
	healthpb.RegisterHealthServer(s.grpc, s.health)

	if err = s.registerMetrics(cfg.Metrics); err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	return s, nil
}

func (s *Server) defaults() {
	if s.nodePort == 0 {
		s.nodePort = wire.APIDPort
	}

	s.log = defaults.Logger(s.log)
	if s.reqLog == nil {
		s.reqLog = s.log
	}

	s.clock = defaults.Clock(s.clock)

	s.rand = defaults.Rand(s.rand)
}

func (s *Server) newGRPCServer(rules authz.Rules, calls *metrics.GRPC) *grpc.Server {
	unary, stream := s.interceptors(rules)

	s.refusals = refusals.New(refusals.Config{
		Logger: s.log, Summary: msgHandshakesRefused, Clock: s.clock,
		Interval: HandshakeRefusalInterval, MaxSources: MaxRefusalSources,
	})
	creds := s.conns.Credentials(auditedCreds{TransportCredentials: credentials.NewTLS(s.serverTLS()), log: s.log, refusals: s.refusals, counted: s.handshakes}, certified)

	// The metrics come first, so that every call is counted as its caller
	// saw it: refused by authz, or Internal after a recovered panic.
	return grpc.NewServer(append(calls.ServerOptions(),
		grpc.Creds(creds),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(s.handle),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.MaxHeaderListSize(MaxMetadataSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.ReadBufferSize(ReadBufferSize),
		grpc.StaticStreamWindowSize(WindowSize),
		grpc.StaticConnWindowSize(ConnWindowSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: MaxIdle}),
		grpc.StatsHandler(connStats{s.conns.StatsHandler()}),
		grpc.InTapHandle(s.tap),
	)...)
}

// Forwards reports whether the node forwards calls to other nodes (it has
// an impersonator certificate).
func (s *Server) Forwards() bool { return s.forward != nil }

// Serve accepts connections on lis, within the bounds of limits.go, until Shutdown or Stop. It returns nil
// after a Shutdown or Stop, once the summaries of refused handshakes are
// written.
func (s *Server) Serve(lis net.Listener) error {
	ctx, stop := context.WithCancel(context.Background())
	summarized := make(chan struct{})

	go func() {
		defer close(summarized)

		s.refusals.Run(ctx)
	}()

	followed := make(chan struct{})

	go func() {
		defer close(followed)

		s.followMachined(ctx)
	}()

	revoked := make(chan struct{})

	go func() {
		defer close(revoked)

		s.followRevocations(ctx)
	}()

	defer func() {
		stop()
		<-summarized
		<-followed
		<-revoked
	}()

	if err := s.grpc.Serve(s.conns.Wrap(lis)); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("apid: %w", err)
	}

	// Serve returns as soon as Stop or Shutdown begins; the handshakes
	// still running are over once they have returned.
	<-s.stopped

	return nil
}

// Shutdown stops accepting connections and waits for open calls to end,
// until ctx ends; streaming calls (such as Events follows, which never end
// by themselves) are ended, Unavailable, after StreamStopGrace already.
// Whatever is still open when ctx ends is closed. It then closes the
// connections to machined and to other nodes.
func (s *Server) Shutdown(ctx context.Context) {
	// Probes see the node go before its connections do.
	s.health.Shutdown()

	done := make(chan struct{})

	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()

	// Streaming calls get StreamStopGrace of the grace, unary ones all of it.
	streams := s.clock.NewTimer(StreamStopGrace)
	defer streams.Stop()

	select {
	case <-done:
	case <-streams.C():
		s.streams.endStreams()
	case <-ctx.Done():
	}

	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}

	s.stopOnce.Do(func() { close(s.stopped) })
	s.closeBackends()
}

// Stop closes every connection and call at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.grpc.Stop()
	s.stopOnce.Do(func() { close(s.stopped) })
	s.closeBackends()
}

func (s *Server) closeBackends() {
	s.streams.stop()
	s.nodes.close()

	if err := s.local.Close(); err != nil {
		s.log.Debug("closing the machined connection", slog.String(logkey.Error, err.Error()))
	}
}
