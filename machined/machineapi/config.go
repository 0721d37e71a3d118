package machineapi

import (
	"context"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/machineconfig"
)

// ConfigChange is one ApplyConfiguration request, checked for form.
type ConfigChange struct {
	// Data is the whole new machine config, unverified.
	Data []byte
	Mode machine.ApplyConfigurationRequest_Mode
	// DryRun answers what would change and changes nothing.
	DryRun bool
	// TryTimeout is how long a TRY stays in effect unless confirmed.
	TryTimeout time.Duration
}

// ConfigResult is what ApplyConfiguration answers.
type ConfigResult struct {
	// Mode is the mode the node chose (AUTO becomes NO_REBOOT or REBOOT).
	Mode machine.ApplyConfigurationRequest_Mode
	// Details says what happened, with the difference of the configs
	// (secrets redacted).
	Details  string
	Warnings []string
}

// Configurator is the node's side of ApplyConfiguration and of reading its
// machine config.
type Configurator interface {
	ApplyConfig(ctx context.Context, change ConfigChange) (ConfigResult, error)
	// MachineConfig returns the config in effect as YAML, secrets replaced
	// by a marker when redact is set, and whether the file on disk differs
	// from it (a staged change or a trial).
	MachineConfig(redact bool) (data []byte, staged bool, err error)
}

// ApplyConfiguration validates a whole machine config and applies it as
// the mode asks: live, at a reboot, staged for the next boot, or on trial.
func (s *Server) ApplyConfiguration(ctx context.Context, req *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	resp, err := s.applyConfiguration(ctx, req)

	return resp, s.toStatus("ApplyConfiguration", err)
}

func (s *Server) applyConfiguration(ctx context.Context, req *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	if s.cfg.Config == nil {
		return nil, refuse(ErrNotHere, "this node does not take configurations over the API")
	}

	change := ConfigChange{Data: req.GetData(), Mode: req.GetMode(), DryRun: req.GetDryRun()}

	if _, ok := machine.ApplyConfigurationRequest_Mode_name[int32(change.Mode)]; !ok {
		return nil, refusef(ErrBadRequest, "unknown mode %d", change.Mode)
	}

	if len(change.Data) == 0 {
		return nil, refuse(ErrBadRequest, "data: the new machine config is empty")
	}

	if len(change.Data) > MaxConfigSize {
		return nil, refusef(ErrBadRequest, "data: %d bytes, limit %d", len(change.Data), MaxConfigSize)
	}

	if change.Mode == machine.ApplyConfigurationRequest_TRY {
		change.TryTimeout = DefaultTryTimeout

		if d := req.GetTryModeTimeout(); d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 || d.AsDuration() > MaxTryTimeout {
				return nil, refusef(ErrBadRequest, "try_mode_timeout must lie in (0, %s]", MaxTryTimeout)
			}

			change.TryTimeout = d.AsDuration()
		}
	}

	res, err := s.cfg.Config.ApplyConfig(ctx, change)
	if err != nil {
		return nil, err
	}

	return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{
		Mode: res.Mode, ModeDetails: res.Details, Warnings: res.Warnings,
	}}}, nil
}

// ConfigServer serves aegis.machineconfig.MachineConfigService from the
// same Configurator.
type ConfigServer struct {
	machineconfig.UnimplementedMachineConfigServiceServer

	s *Server
}

// ConfigService returns the server of the node's MachineConfigService.
func (s *Server) ConfigService() *ConfigServer { return &ConfigServer{s: s} }

// Register adds the server to a gRPC server.
func (c *ConfigServer) Register(g *grpc.Server) {
	machineconfig.RegisterMachineConfigServiceServer(g, c)
}

// Get returns the machine config in effect.
func (c *ConfigServer) Get(_ context.Context, req *machineconfig.GetRequest) (*machineconfig.GetResponse, error) {
	if c.s.cfg.Config == nil {
		return nil, c.s.toStatus("Get", refuse(ErrNotHere, "this node does not serve its configuration"))
	}

	data, staged, err := c.s.cfg.Config.MachineConfig(req.GetRedact())
	if err != nil {
		return nil, c.s.toStatus("Get", err)
	}

	return &machineconfig.GetResponse{Messages: []*machineconfig.Config{{Data: data, Staged: staged}}}, nil
}
