package machineapi

import (
	"context"
	"errors"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// etcd returns the node's etcd, or the status saying why there is none.
func (s *Server) etcd() (Etcd, error) {
	if s.cfg.Etcd == nil {
		return nil, status.Error(codes.FailedPrecondition, etcd.ErrNotControlPlane.Error())
	}

	e, err := s.cfg.Etcd()
	if err != nil {
		return nil, s.etcdError("etcd", err)
	}

	return e, nil
}

// etcdError maps the etcd controller's errors to statuses.
func (s *Server) etcdError(method string, err error) error {
	switch {
	case errors.Is(err, etcd.ErrNotControlPlane), errors.Is(err, etcd.ErrBootstrapped),
		errors.Is(err, etcd.ErrQuorum), errors.Is(err, etcd.ErrNoSnapshot):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, etcd.ErrMemberNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, etcd.ErrBadSnapshot):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, etcd.ErrNotRunning):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}

	if _, ok := status.FromError(err); ok {
		return err
	}

	return s.internal(method, err)
}

// Bootstrap forms a one-member etcd cluster on this control plane, from the
// uploaded snapshot with recover_etcd.
func (s *Server) Bootstrap(ctx context.Context, req *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	if err = e.Bootstrap(ctx, req.GetRecoverEtcd()); err != nil {
		return nil, s.etcdError("Bootstrap", err)
	}

	return &machine.BootstrapResponse{Messages: []*machine.Bootstrap{{}}}, nil
}

// EtcdMemberList lists the cluster's members.
func (s *Server) EtcdMemberList(ctx context.Context, _ *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	members, err := e.MemberList(ctx)
	if err != nil {
		return nil, s.etcdError("EtcdMemberList", err)
	}

	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{Members: members}}}, nil
}

// EtcdStatus reports the local member's status.
func (s *Server) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdStatusResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	st, err := e.Status(ctx)
	if err != nil {
		return nil, s.etcdError("EtcdStatus", err)
	}

	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: st}}}, nil
}

// EtcdLeaveCluster takes this node out of the cluster.
func (s *Server) EtcdLeaveCluster(ctx context.Context, _ *machine.EtcdLeaveClusterRequest) (*machine.EtcdLeaveClusterResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	if err = e.Leave(ctx); err != nil {
		return nil, s.etcdError("EtcdLeaveCluster", err)
	}

	return &machine.EtcdLeaveClusterResponse{Messages: []*machine.EtcdLeaveCluster{{}}}, nil
}

// EtcdRemoveMemberByID removes a member by its ID.
func (s *Server) EtcdRemoveMemberByID(ctx context.Context, req *machine.EtcdRemoveMemberByIDRequest) (*machine.EtcdRemoveMemberByIDResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	if req.GetMemberId() == 0 {
		return nil, status.Error(codes.InvalidArgument, "member_id is required")
	}

	if err = e.RemoveMember(ctx, req.GetMemberId()); err != nil {
		return nil, s.etcdError("EtcdRemoveMemberByID", err)
	}

	return &machine.EtcdRemoveMemberByIDResponse{Messages: []*machine.EtcdRemoveMemberByID{{}}}, nil
}

// EtcdForfeitLeadership hands the leadership on if this member leads.
func (s *Server) EtcdForfeitLeadership(ctx context.Context, _ *machine.EtcdForfeitLeadershipRequest) (*machine.EtcdForfeitLeadershipResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	leader, err := e.ForfeitLeadership(ctx)
	if err != nil {
		return nil, s.etcdError("EtcdForfeitLeadership", err)
	}

	return &machine.EtcdForfeitLeadershipResponse{Messages: []*machine.EtcdForfeitLeadership{{Member: leader}}}, nil
}

// EtcdDefragment defragments the local member.
func (s *Server) EtcdDefragment(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdDefragmentResponse, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	if err = e.Defragment(ctx); err != nil {
		return nil, s.etcdError("EtcdDefragment", err)
	}

	return &machine.EtcdDefragmentResponse{Messages: []*machine.EtcdDefragment{{}}}, nil
}

// EtcdAlarmList lists the cluster's alarms.
func (s *Server) EtcdAlarmList(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmListResponse, error) {
	alarms, err := s.alarms(ctx, false)
	if err != nil {
		return nil, err
	}

	return &machine.EtcdAlarmListResponse{Messages: []*machine.EtcdAlarm{{MemberAlarms: alarms}}}, nil
}

// EtcdAlarmDisarm disarms the cluster's alarms.
func (s *Server) EtcdAlarmDisarm(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmDisarmResponse, error) {
	alarms, err := s.alarms(ctx, true)
	if err != nil {
		return nil, err
	}

	return &machine.EtcdAlarmDisarmResponse{Messages: []*machine.EtcdAlarmDisarm{{MemberAlarms: alarms}}}, nil
}

func (s *Server) alarms(ctx context.Context, disarm bool) ([]*machine.EtcdMemberAlarm, error) {
	e, err := s.etcd()
	if err != nil {
		return nil, err
	}

	alarms, err := e.Alarms(ctx, disarm)
	if err != nil {
		return nil, s.etcdError("EtcdAlarm", err)
	}

	return alarms, nil
}

// EtcdSnapshot streams a snapshot of the local member.
func (s *Server) EtcdSnapshot(_ *machine.EtcdSnapshotRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	e, err := s.etcd()
	if err != nil {
		return err
	}

	err = e.Snapshot(stream.Context(), func(b []byte) error { return stream.Send(&common.Data{Bytes: b}) })
	if err != nil {
		return s.etcdError("EtcdSnapshot", err)
	}

	return nil
}

// EtcdRecover takes a snapshot for a later Bootstrap with recover_etcd.
func (s *Server) EtcdRecover(stream grpc.ClientStreamingServer[common.Data, machine.EtcdRecoverResponse]) error {
	e, err := s.etcd()
	if err != nil {
		return err
	}

	err = e.Recover(func() ([]byte, error) {
		d, err := stream.Recv()

		return d.GetBytes(), err
	})
	if err != nil {
		return s.etcdError("EtcdRecover", err)
	}

	return stream.SendAndClose(&machine.EtcdRecoverResponse{Messages: []*machine.EtcdRecover{{}}})
}
