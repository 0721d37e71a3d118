package machineapi

import (
	"context"
	"errors"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/machined/certapi"
)

// Reboot restarts the node: in user mode machined stops every service and
// runs the boot sequence again. It acts after replying.
func (s *Server) Reboot(_ context.Context, req *machine.RebootRequest) (*machine.RebootResponse, error) {
	if req.GetMode() == machine.RebootRequest_POWERCYCLE {
		return nil, status.Error(codes.InvalidArgument, "power-cycle reboots need hardware; a user-mode node reboots by running its boot sequence again")
	}

	actor := s.newActorID()
	s.cfg.Lifecycle.Reboot(actor)

	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actor}}}, nil
}

// Shutdown stops the node's services cleanly and ends machined. It acts
// after replying.
func (s *Server) Shutdown(context.Context, *machine.ShutdownRequest) (*machine.ShutdownResponse, error) {
	actor := s.newActorID()
	s.cfg.Lifecycle.Shutdown(actor)

	return &machine.ShutdownResponse{Messages: []*machine.Shutdown{{ActorId: actor}}}, nil
}

// GenerateClientConfiguration issues client credentials with the roles and
// lifetime asked for (the lifetime is capped by the client profile).
func (s *Server) GenerateClientConfiguration(_ context.Context, req *machine.GenerateClientConfigurationRequest) (*machine.GenerateClientConfigurationResponse, error) {
	if s.cfg.ClientConfig == nil {
		return nil, status.Error(codes.FailedPrecondition, "client configurations are issued by control-plane nodes only")
	}

	roles, err := role.Parse(req.GetRoles())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	if len(roles) == 0 {
		return nil, status.Error(codes.InvalidArgument, "at least one role is required")
	}

	ttl, err := certapi.CheckTTL("crt_ttl", req.GetCrtTtl())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	if req.GetCrtTtl() != nil && ttl == 0 {
		return nil, status.Error(codes.InvalidArgument, "crt_ttl must be positive")
	}

	caPEM, crt, key, cfg, err := s.cfg.ClientConfig.IssueClientConfig(roles, ttl)
	if err != nil {
		var refusal *ca.Error
		if errors.As(err, &refusal) {
			return nil, status.Error(codes.InvalidArgument, refusal.Error())
		}

		if _, ok := status.FromError(err); ok {
			return nil, err
		}

		return nil, s.internal("GenerateClientConfiguration", err)
	}

	return &machine.GenerateClientConfigurationResponse{Messages: []*machine.GenerateClientConfiguration{{
		Ca: caPEM, Crt: crt, Key: key, Talosconfig: cfg,
	}}}, nil
}
