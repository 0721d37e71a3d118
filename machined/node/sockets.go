package node

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/grpcrecover"
	"github.com/aegis-os/aegis/internal/healthprobe"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/unixsock"
	"github.com/aegis-os/aegis/machined/certapi"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/rotation"
	"github.com/aegis-os/aegis/machined/timeapi"
)

// sockets are machined's gRPC servers on the node's Unix sockets.
type sockets struct {
	servers []*grpc.Server
	closers []func()
	serving sync.WaitGroup // the servers' Serve, which stop waits for
}

// listen opens machined's sockets and serves them until stop:
//   - machined.sock: the API calls apid forwards (the MachineService, the
//     token proxy and the certificate service), authorized again from the
//     roles apid passes in talos-role metadata;
//   - apid.sock and trustd.sock: each service's view of the node's resources,
//     refusing and logging anything else.
func (n *Node) listen() (*sockets, error) {
	s := &sockets{}

	tokenProxy, err := newTokenProxy(n)
	if err != nil {
		return nil, err
	}

	s.closers = append(s.closers, tokenProxy.close)

	calls, err := metrics.NewGRPC(n.cfg.Metrics, metrics.GRPCConfig{})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	admission := machineapi.NewAdmission(machineapi.MaxCalls)
	if err = registerAdmission(n.cfg.Metrics, admission); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	api := newAPIServer(n.log, admission, calls.ServerOptions()...)
	healthpb.RegisterHealthServer(api, n.status.health)

	machineAPI := machineapi.New(machineapi.Config{
		Hostname: func() string { res, _ := n.store.Current(); return res.GetHostname() },
		Services: n.services, Logs: n, Bus: n.bus, Lifecycle: n, Config: n, Reset: n,
		ClientConfig: clientIssuer{n}, Etcd: n.Etcd, KernelLog: kernelLog(), Clock: n.clock, Logger: n.log,
		Containers: n.containersAPI(), BootID: n.bootID.current, Upgrader: n, Uploads: n.uploads(),
	})
	machineAPI.Register(api)
	n.setVersion(machineAPI)
	machineAPI.ConfigService().Register(api)
	machineAPI.BundleService().Register(api)
	resourceapi.NewServer(n.res).Register(api)
	timeapi.New(timeapi.Config{Source: n.config.timeSource, Clock: n.clock}).Register(api)
	tokens.RegisterTokenServiceServer(api, tokenProxy)
	certapi.New(certapi.Config{Authority: clientIssuer{n}, Revoked: n.revoked.isRevoked, Lineage: renewals{&n.revoked}, Logger: n.log,
		Counted: n.clientCerts,
	}).Register(api)
	revocation.NewServer(revocation.ServerConfig{
		Store: n.revoked.etcdStore, Local: n.revoked.list, Clock: n.clock, Logger: n.log,
	}).Register(api)

	rotation.NewServer(rotation.ServerConfig{
		Store: n.rotationStore, Reissue: n.reissue, Clock: n.clock, Logger: n.log,
	}).Register(api)

	memberCfg := membership.ServerConfig{Logger: n.log, Clock: n.clock}
	if n.cfg.Machine.Machine.Type.IsControlPlane() {
		rec := certifiedRecordOf(n)
		memberCfg.Members, memberCfg.Certified, memberCfg.RemoveEntries, memberCfg.Release = n.Members(), rec.Certified, rec.RemoveEntries, rec.Release
	}

	membership.NewServer(memberCfg).Register(api)
	n.clusterHealth().Register(api)

	for _, sock := range []struct {
		path   string
		server *grpc.Server
	}{
		{n.layout.MachinedSocket(), api},
		{n.layout.APIDResources(), newResourceServer(n.layout.APIDResources(), resources.NewServer(n.store, resources.APIDView, n.members), n.log)},
		{n.layout.TrustdResources(), newResourceServer(n.layout.TrustdResources(), resources.NewServer(n.store, resources.TrustdView, n.members), n.log)},
	} {
		lis, err := unixsock.Listen(sock.path)
		if err != nil {
			s.stop()

			return nil, err
		}

		s.serve(sock.server, lis, n.log)
	}

	return s, nil
}

// newAPIServer is machined.sock's server, without its services: panic
// recovery first (so it covers the authorization too), then the line of
// each call in machined's log (callLog), the roles apid passed and their
// authorization, for every method but the health service's, which apid
// probes without roles. The credential audit
// (audit.go) comes before authorization, so refusals are recorded too.
//
// admission bounds the open calls (nil: a new one of machineapi.MaxCalls);
// first are server options given before all of these: the metrics, so that
// every call is counted as its caller saw it.
func newAPIServer(log *slog.Logger, admission *machineapi.Admission, first ...grpc.ServerOption) *grpc.Server {
	if admission == nil {
		admission = machineapi.NewAdmission(machineapi.MaxCalls)
	}

	calls := callLog{log: log}
	injector := authz.NewInjector(authz.InjectorConfig{Mode: authz.FromTrustedMetadata, Logger: log})
	authorizer := authz.NewAuthorizer(authz.AuthorizerConfig{Logger: log})
	opts := append(append(first, recoveryOptions(log)...), admission.ServerOptions()...)

	return grpc.NewServer(append(opts,
		grpcopt.StreamWorkers(), grpc.UnknownServiceHandler(notServed),
		grpc.StaticStreamWindowSize(machineapi.WindowSize), grpc.StaticConnWindowSize(machineapi.ConnWindowSize),
		grpc.ChainUnaryInterceptor(healthprobe.Unary(calls.unary, credentialAudit(log), injector.UnaryServerInterceptor(), authorizer.UnaryServerInterceptor())...),
		grpc.ChainStreamInterceptor(healthprobe.Stream(calls.stream, injector.StreamServerInterceptor(), authorizer.StreamServerInterceptor())...),
	)...)
}

// notServed answers a method of a service machined does not have (a Talos
// service such as cluster.ClusterService, or one of a later Talos version)
// Unimplemented, naming the method, as it answers the methods it has and
// does not implement; the caller never sees "unknown service". It runs
// behind the same interceptors: authorization (admin-only for a method
// without a rule) comes first.
func notServed(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)

	return status.Errorf(codes.Unimplemented, "%s is not implemented by Aegis nodes", method)
}

// recoveryOptions answer a panic in a handler with Internal and a
// reference that is also in the log line with the stack; machined, which
// runs the node, goes on serving.
func recoveryOptions(log *slog.Logger) []grpc.ServerOption {
	return grpcrecover.New(grpcrecover.Config{Component: "machined", Logger: log}).ServerOptions()
}

// newResourceServer is the server of a service's resource socket.
func newResourceServer(path string, srv *resources.Server, log *slog.Logger) *grpc.Server {
	g := grpc.NewServer(append(recoveryOptions(log),
		resources.DenyOthers(path, log), grpc.MaxConcurrentStreams(resources.MaxWatches))...)
	node.RegisterNodeServiceServer(g, srv)

	return g
}

func (s *sockets) serve(g *grpc.Server, lis net.Listener, log *slog.Logger) {
	s.servers = append(s.servers, g)

	s.serving.Go(func() {
		if err := g.Serve(lis); err != nil {
			log.Error("socket server ended", slog.String(logkey.Socket, lis.Addr().String()), slog.String(logkey.Error, err.Error()))
		}
	})
}

// stop closes every socket at once: follows (Logs, Events, resource
// watches) never end by themselves, so there is nothing to drain.
func (s *sockets) stop() {
	for _, g := range s.servers {
		g.Stop()
	}

	s.serving.Wait()

	for _, c := range s.closers {
		c()
	}
}

// kernelLog is the kernel log Dmesg serves: /dev/kmsg when machined is the
// host's init, none when it runs as a process on a host (see machineapi's
// Dmesg for why).
func kernelLog() string {
	if os.Getpid() == 1 {
		return "/dev/kmsg"
	}

	return ""
}
