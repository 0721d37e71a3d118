package node

import (
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/unixsock"
	"github.com/aegis-os/aegis/machined/certapi"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/resources"
)

// sockets are machined's gRPC servers on the node's Unix sockets.
type sockets struct {
	servers []*grpc.Server
	closers []func()
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

	injector := authz.NewInjector(authz.InjectorConfig{Mode: authz.FromTrustedMetadata, Logger: n.log})
	authorizer := authz.NewAuthorizer(authz.AuthorizerConfig{Logger: n.log})

	api := grpc.NewServer(append(machineapi.NewAdmission(machineapi.MaxCalls).ServerOptions(),
		grpcopt.StreamWorkers(),
		grpc.ChainUnaryInterceptor(injector.UnaryServerInterceptor(), authorizer.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(injector.StreamServerInterceptor(), authorizer.StreamServerInterceptor()),
	)...)

	machineapi.New(machineapi.Config{
		Hostname: func() string { res, _ := n.store.Current(); return res.GetHostname() },
		Services: n.services, Logs: n, Bus: n.bus, Lifecycle: n,
		ClientConfig: clientIssuer{n}, Etcd: n.Etcd, Clock: n.clock, Logger: n.log,
	}).Register(api)
	tokens.RegisterTokenServiceServer(api, tokenProxy)
	certapi.New(certapi.Config{Authority: clientIssuer{n}, Logger: n.log}).Register(api)

	for _, sock := range []struct {
		path   string
		server *grpc.Server
	}{
		{n.layout.MachinedSocket(), api},
		{n.layout.APIDResources(), n.resourceServer(n.layout.APIDResources(), resources.APIDView)},
		{n.layout.TrustdResources(), n.resourceServer(n.layout.TrustdResources(), resources.TrustdView)},
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

func (n *Node) resourceServer(path string, view resources.View) *grpc.Server {
	g := grpc.NewServer(resources.DenyOthers(path, n.log), grpc.MaxConcurrentStreams(resources.MaxWatches))
	node.RegisterNodeServiceServer(g, resources.NewServer(n.store, view))

	return g
}

func (s *sockets) serve(g *grpc.Server, lis net.Listener, log *slog.Logger) {
	s.servers = append(s.servers, g)

	go func() {
		if err := g.Serve(lis); err != nil {
			log.Error("socket server ended", slog.String(logkey.Socket, lis.Addr().String()), slog.String(logkey.Error, err.Error()))
		}
	}()
}

// stop closes every socket at once: follows (Logs, Events, resource
// watches) never end by themselves, so there is nothing to drain.
func (s *sockets) stop() {
	for _, g := range s.servers {
		g.Stop()
	}

	for _, c := range s.closers {
		c()
	}
}
