package machineapi

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/machined/etcd"
)

// Etcd is the node's etcd, as the Etcd* methods and Bootstrap use it.
type Etcd interface {
	Bootstrap(ctx context.Context, fromSnapshot bool) error
	MemberList(ctx context.Context) ([]*machine.EtcdMember, error)
	Status(ctx context.Context) (*machine.EtcdMemberStatus, error)
	Leave(ctx context.Context) error
	RemoveMember(ctx context.Context, id uint64) error
	ForfeitLeadership(ctx context.Context) (string, error)
	Defragment(ctx context.Context) error
	Alarms(ctx context.Context, disarm bool) ([]*machine.EtcdMemberAlarm, error)
	Snapshot(ctx context.Context, send func([]byte) error) error
	Recover(recv func() ([]byte, error)) error
}

// etcd returns the node's etcd, or the error saying why there is none.
func (s *Server) etcd() (Etcd, error) {
	if s.cfg.Etcd == nil {
		return nil, etcd.ErrNotControlPlane
	}

	return s.cfg.Etcd()
}

// Bootstrap forms a one-member etcd cluster on this control plane, from the
// uploaded snapshot with recover_etcd.
func (s *Server) Bootstrap(ctx context.Context, req *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("Bootstrap", err)
	}

	if err = e.Bootstrap(ctx, req.GetRecoverEtcd()); err != nil {
		return nil, s.toStatus("Bootstrap", err)
	}

	return &machine.BootstrapResponse{Messages: []*machine.Bootstrap{{}}}, nil
}

// EtcdMemberList lists the cluster's members.
func (s *Server) EtcdMemberList(ctx context.Context, _ *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdMemberList", err)
	}

	members, err := e.MemberList(ctx)
	if err != nil {
		return nil, s.toStatus("EtcdMemberList", err)
	}

	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{Members: members}}}, nil
}

// EtcdStatus reports the local member's status.
func (s *Server) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdStatusResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdStatus", err)
	}

	st, err := e.Status(ctx)
	if err != nil {
		return nil, s.toStatus("EtcdStatus", err)
	}

	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: st}}}, nil
}

// EtcdLeaveCluster takes this node out of the cluster.
func (s *Server) EtcdLeaveCluster(ctx context.Context, _ *machine.EtcdLeaveClusterRequest) (*machine.EtcdLeaveClusterResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdLeaveCluster", err)
	}

	if err = e.Leave(ctx); err != nil {
		return nil, s.toStatus("EtcdLeaveCluster", err)
	}

	return &machine.EtcdLeaveClusterResponse{Messages: []*machine.EtcdLeaveCluster{{}}}, nil
}

// EtcdRemoveMemberByID removes a member by its ID.
func (s *Server) EtcdRemoveMemberByID(ctx context.Context, req *machine.EtcdRemoveMemberByIDRequest) (*machine.EtcdRemoveMemberByIDResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdRemoveMemberByID", err)
	}

	if req.GetMemberId() == 0 {
		return nil, s.toStatus("EtcdRemoveMemberByID", refuse(ErrBadRequest, "member_id is required"))
	}

	if err = e.RemoveMember(ctx, req.GetMemberId()); err != nil {
		return nil, s.toStatus("EtcdRemoveMemberByID", err)
	}

	return &machine.EtcdRemoveMemberByIDResponse{Messages: []*machine.EtcdRemoveMemberByID{{}}}, nil
}

// EtcdForfeitLeadership hands the leadership on if this member leads.
func (s *Server) EtcdForfeitLeadership(ctx context.Context, _ *machine.EtcdForfeitLeadershipRequest) (*machine.EtcdForfeitLeadershipResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdForfeitLeadership", err)
	}

	leader, err := e.ForfeitLeadership(ctx)
	if err != nil {
		return nil, s.toStatus("EtcdForfeitLeadership", err)
	}

	return &machine.EtcdForfeitLeadershipResponse{Messages: []*machine.EtcdForfeitLeadership{{Member: leader}}}, nil
}

// EtcdDefragment defragments the local member.
func (s *Server) EtcdDefragment(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdDefragmentResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus("EtcdDefragment", err)
	}

	if err = e.Defragment(ctx); err != nil {
		return nil, s.toStatus("EtcdDefragment", err)
	}

	return &machine.EtcdDefragmentResponse{Messages: []*machine.EtcdDefragment{{}}}, nil
}

// EtcdAlarmList lists the cluster's alarms.
func (s *Server) EtcdAlarmList(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmListResponse, error) {
	alarms, err := s.alarms(ctx, "EtcdAlarmList", false)
	if err != nil {
		return nil, err
	}

	return &machine.EtcdAlarmListResponse{Messages: []*machine.EtcdAlarm{{MemberAlarms: alarms}}}, nil
}

// EtcdAlarmDisarm disarms the cluster's alarms.
func (s *Server) EtcdAlarmDisarm(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmDisarmResponse, error) {
	alarms, err := s.alarms(ctx, "EtcdAlarmDisarm", true)
	if err != nil {
		return nil, err
	}

	return &machine.EtcdAlarmDisarmResponse{Messages: []*machine.EtcdAlarmDisarm{{MemberAlarms: alarms}}}, nil
}

func (s *Server) alarms(ctx context.Context, method string, disarm bool) ([]*machine.EtcdMemberAlarm, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, s.toStatus(method, err)
	}

	alarms, err := e.Alarms(ctx, disarm)
	if err != nil {
		return nil, s.toStatus(method, err)
	}

	return alarms, nil
}

// EtcdSnapshot streams a snapshot of the local member.
func (s *Server) EtcdSnapshot(_ *machine.EtcdSnapshotRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	e, err := s.etcd()
	if err != nil {
		return s.toStatus("EtcdSnapshot", err)
	}

	err = e.Snapshot(stream.Context(), func(b []byte) error { return stream.Send(&common.Data{Bytes: b}) })
	if err != nil {
		return s.toStatus("EtcdSnapshot", err)
	}

	return nil
}

// EtcdRecover takes a snapshot for a later Bootstrap with recover_etcd.
func (s *Server) EtcdRecover(stream grpc.ClientStreamingServer[common.Data, machine.EtcdRecoverResponse]) error {
	e, err := s.etcd()
	if err != nil {
		return s.toStatus("EtcdRecover", err)
	}

	err = e.Recover(func() ([]byte, error) {
		d, err := stream.Recv()

		return d.GetBytes(), err
	})
	if err != nil {
		return s.toStatus("EtcdRecover", err)
	}

	return stream.SendAndClose(&machine.EtcdRecoverResponse{Messages: []*machine.EtcdRecover{{}}})
}
