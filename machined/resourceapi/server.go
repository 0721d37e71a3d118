package resourceapi

import (
	"context"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readOnly is the refusal of every write: the node's resources follow the
// node's own state, and a client changes that state through the
// MachineService (services, reboots, configs), never by writing resources.
func readOnly(method string) error {
	return status.Errorf(codes.PermissionDenied,
		"cosi.resource.State/%s: the node's resources are read-only; they follow the node's state", method)
}

// Server is cosi.resource.State over a State: Get, List and Watch as the
// COSI runtime serves them; Create, Update and Destroy refused.
type Server struct {
	*server.State
}

// NewServer returns the read-only server of s: every read passes the
// node's access policy (access.go) before it reaches the state.
func NewServer(s *State) *Server {
	return &Server{State: server.NewState(state.Filter(s.Reader(), policy(s.Reader())))}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { v1alpha1.RegisterStateServer(g, s) }

// Create is refused.
func (s *Server) Create(context.Context, *v1alpha1.CreateRequest) (*v1alpha1.CreateResponse, error) {
	return nil, readOnly("Create")
}

// Update is refused.
func (s *Server) Update(context.Context, *v1alpha1.UpdateRequest) (*v1alpha1.UpdateResponse, error) {
	return nil, readOnly("Update")
}

// Destroy is refused.
func (s *Server) Destroy(context.Context, *v1alpha1.DestroyRequest) (*v1alpha1.DestroyResponse, error) {
	return nil, readOnly("Destroy")
}
