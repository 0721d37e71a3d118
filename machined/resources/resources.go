// Package resources hands the node's resources (certificates, CAs,
// addresses, time status) from machined to the services it runs. machined
// publishes the whole set; each service's socket serves only the fields that
// service may read, and refuses and logs everything else.
package resources

import (
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Store holds the current resources of the node and tells watchers when they
// change. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	cur     *node.Resources
	changed chan struct{}
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{cur: &node.Resources{}, changed: make(chan struct{})}
}

// Update applies fn to a copy of the resources and publishes the result.
func (s *Store) Update(fn func(r *node.Resources)) {
	s.mu.Lock()
	defer s.mu.Unlock()

	next := proto.CloneOf(s.cur)
	fn(next)

	if proto.Equal(next, s.cur) {
		return
	}

	s.cur = next

	close(s.changed)
	s.changed = make(chan struct{})
}

// Current returns the resources and a channel closed at the next change.
func (s *Store) Current() (*node.Resources, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.cur, s.changed
}

// View selects what one service may read.
type View func(all *node.Resources) *node.Resources

// APIDView is what apid reads: its certificates, the accepted CAs, the
// node's addresses, hostname and role, and the revocation list (the
// cluster's member names come through WatchMembers).
func APIDView(all *node.Resources) *node.Resources {
	return &node.Resources{
		Server: all.GetServer(), Impersonator: all.GetImpersonator(), AcceptedCas: all.GetAcceptedCas(),
		Addresses: all.GetAddresses(), Hostname: all.GetHostname(), Revoked: all.GetRevoked(),
		Role: all.GetRole(),
	}
}

// TrustdView is what trustd reads: the OS CA, its server certificate, the
// accepted CAs, the machine config's tokens and the names they obtain, the
// control planes' hosts, the time status and the revocation list with its
// revision (which it serves to the nodes); the member list comes through
// WatchMembers.
func TrustdView(all *node.Resources) *node.Resources {
	return &node.Resources{
		Server: all.GetServer(), OsCa: all.GetOsCa(), AcceptedCas: all.GetAcceptedCas(),
		TrustdToken: all.GetTrustdToken(), Time: all.GetTime(), Hostname: all.GetHostname(),
		ControlPlaneHosts: all.GetControlPlaneHosts(), WorkerSans: all.GetWorkerSans(), Revoked: all.GetRevoked(),
		RevokedRevision: all.GetRevokedRevision(), PreviousTrustdTokens: all.GetPreviousTrustdTokens(),
	}
}

// Server serves one service's view of a Store.
type Server struct {
	node.UnimplementedNodeServiceServer

	store   *Store
	view    View
	members *Members
}

// NewServer returns a NodeService serving view of store, and members
// through WatchMembers unless members is nil.
func NewServer(store *Store, view View, members *Members) *Server {
	return &Server{store: store, view: view, members: members}
}

// Watch sends the view now and after every change that alters it.
func (s *Server) Watch(_ *node.WatchRequest, stream grpc.ServerStreamingServer[node.Resources]) error {
	var last *node.Resources

	for {
		all, changed := s.store.Current()

		if v := s.view(all); last == nil || !proto.Equal(v, last) {
			if err := stream.Send(v); err != nil {
				return err
			}

			last = v
		}

		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// DenyOthers makes a service socket's gRPC server refuse, and log, every
// method it does not serve: a service reaches machined only for what its
// socket offers.
func DenyOthers(socket string, log *slog.Logger) grpc.ServerOption {
	return grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		log.Warn("denied request on service socket", slog.String(logkey.Socket, socket), slog.String(logkey.Method, method))

		return status.Errorf(codes.PermissionDenied, "%s is not available on this socket", method)
	})
}
