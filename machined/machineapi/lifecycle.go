package machineapi

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/machined/certapi"
)

// Reboot restarts the node: in user mode machined stops every service and
// runs the boot sequence again. It acts after replying.
func (s *Server) Reboot(_ context.Context, req *machine.RebootRequest) (*machine.RebootResponse, error) {
	if req.GetMode() == machine.RebootRequest_POWERCYCLE {
		return nil, s.toStatus("Reboot", refuse(ErrBadRequest, "power-cycle reboots need hardware; a user-mode node reboots by running its boot sequence again"))
	}

	actor := s.newID()
	s.cfg.Lifecycle.Reboot(actor)

	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actor}}}, nil
}

// Shutdown stops the node's services cleanly and ends machined. It acts
// after replying.
func (s *Server) Shutdown(context.Context, *machine.ShutdownRequest) (*machine.ShutdownResponse, error) {
	actor := s.newID()
	s.cfg.Lifecycle.Shutdown(actor)

	return &machine.ShutdownResponse{Messages: []*machine.Shutdown{{ActorId: actor}}}, nil
}

// GenerateClientConfiguration issues client credentials with the roles and
// lifetime asked for (the lifetime is capped by the client profile).
func (s *Server) GenerateClientConfiguration(_ context.Context, req *machine.GenerateClientConfigurationRequest) (*machine.GenerateClientConfigurationResponse, error) {
	resp, err := s.generateClientConfiguration(req)

	return resp, s.toStatus("GenerateClientConfiguration", err)
}

func (s *Server) generateClientConfiguration(req *machine.GenerateClientConfigurationRequest) (*machine.GenerateClientConfigurationResponse, error) {
	if s.cfg.ClientConfig == nil {
		return nil, errWorker
	}

	roles, err := role.Parse(req.GetRoles())
	if err != nil {
		return nil, refuse(ErrBadRequest, err.Error())
	}

	if len(roles) == 0 {
		return nil, refuse(ErrBadRequest, "at least one role is required")
	}

	ttl, err := certapi.CheckTTL("crt_ttl", req.GetCrtTtl())
	if err != nil {
		return nil, refuse(ErrBadRequest, err.Error())
	}

	if req.GetCrtTtl() != nil && ttl == 0 {
		return nil, refuse(ErrBadRequest, "crt_ttl must be positive")
	}

	caPEM, crt, key, cfg, err := s.cfg.ClientConfig.IssueClientConfig(roles, ttl)
	if err != nil {
		return nil, err
	}

	return &machine.GenerateClientConfigurationResponse{Messages: []*machine.GenerateClientConfiguration{{
		Ca: caPEM, Crt: crt, Key: key, Talosconfig: cfg,
	}}}, nil
}
