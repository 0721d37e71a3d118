package machineapi

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/machined/system"
)

// ServiceList reports every service: state, health and recent events.
func (s *Server) ServiceList(context.Context, *emptypb.Empty) (*machine.ServiceListResponse, error) {
	list := &machine.ServiceList{}

	for _, info := range s.cfg.Services.List() {
		list.Services = append(list.Services, serviceInfo(info))
	}

	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{list}}, nil
}

func serviceInfo(info system.Info) *machine.ServiceInfo {
	out := &machine.ServiceInfo{
		Id:     info.ID,
		State:  info.State.String(),
		Events: &machine.ServiceEvents{},
		Health: &machine.ServiceHealth{Unknown: true},
	}

	for _, e := range info.Events {
		out.Events.Events = append(out.Events.Events, &machine.ServiceEvent{
			Msg: e.Message, State: e.State.String(), Ts: timestamppb.New(e.Time),
		})
	}

	if info.HasHealth {
		out.Health = &machine.ServiceHealth{
			Unknown: info.Health.Unknown, Healthy: info.Health.Healthy, LastMessage: info.Health.LastMessage,
		}
		if !info.Health.LastChange.IsZero() {
			out.Health.LastChange = timestamppb.New(info.Health.LastChange)
		}
	}

	return out
}

// ServiceStart starts a service that allows it.
func (s *Server) ServiceStart(ctx context.Context, req *machine.ServiceStartRequest) (*machine.ServiceStartResponse, error) {
	if _, err := s.serviceAction(ctx, req.GetId(), system.ActionStart); err != nil {
		return nil, s.toStatus("ServiceStart", err)
	}

	return &machine.ServiceStartResponse{Messages: []*machine.ServiceStart{{Resp: fmt.Sprintf("Service %q started", req.GetId())}}}, nil
}

// ServiceStop stops a service that allows it.
func (s *Server) ServiceStop(ctx context.Context, req *machine.ServiceStopRequest) (*machine.ServiceStopResponse, error) {
	if _, err := s.serviceAction(ctx, req.GetId(), system.ActionStop); err != nil {
		return nil, s.toStatus("ServiceStop", err)
	}

	return &machine.ServiceStopResponse{Messages: []*machine.ServiceStop{{Resp: fmt.Sprintf("Service %q stopped", req.GetId())}}}, nil
}

// ServiceRestart restarts a service that allows it. apid, which carries this
// very call, is restarted just after the answer: "restarting", not
// "restarted".
func (s *Server) ServiceRestart(ctx context.Context, req *machine.ServiceRestartRequest) (*machine.ServiceRestartResponse, error) {
	later, err := s.serviceAction(ctx, req.GetId(), system.ActionRestart)
	if err != nil {
		return nil, s.toStatus("ServiceRestart", err)
	}

	msg := fmt.Sprintf("Service %q restarted", req.GetId())
	if later {
		msg = fmt.Sprintf("Service %q restarting", req.GetId())
	}

	return &machine.ServiceRestartResponse{Messages: []*machine.ServiceRestart{{Resp: msg}}}, nil
}

func (s *Server) serviceAction(ctx context.Context, id string, action system.Action) (later bool, err error) {
	if id == "" {
		return false, refuse(ErrBadRequest, "service id is required")
	}

	return s.cfg.Services.API(ctx, id, action)
}
