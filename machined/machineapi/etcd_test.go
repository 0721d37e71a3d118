package machineapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/etcd"
)

// failingEtcd answers every operation with err.
type failingEtcd struct{ err error }

func (f failingEtcd) Bootstrap(context.Context, bool) error { return f.err }
func (f failingEtcd) MemberList(context.Context) ([]*machine.EtcdMember, error) {
	return nil, f.err
}
func (f failingEtcd) Status(context.Context) (*machine.EtcdMemberStatus, error) { return nil, f.err }
func (f failingEtcd) Leave(context.Context) error                               { return f.err }
func (f failingEtcd) RemoveMember(context.Context, uint64) error                { return f.err }
func (f failingEtcd) ForfeitLeadership(context.Context) (string, error)         { return "", f.err }
func (f failingEtcd) Defragment(context.Context) error                          { return f.err }
func (f failingEtcd) Alarms(context.Context, bool) ([]*machine.EtcdMemberAlarm, error) {
	return nil, f.err
}
func (f failingEtcd) Snapshot(context.Context, func([]byte) error) error { return f.err }
func (f failingEtcd) Recover(func() ([]byte, error)) error               { return f.err }

// TestEtcdErrors: each refusal of the node's etcd reaches the caller with
// its code and message; anything else is Internal without its cause.
func TestEtcdErrors(t *testing.T) {
	tests := []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("%w: data dir not empty", etcd.ErrBootstrapped), codes.FailedPrecondition},
		{etcd.ErrNotControlPlane, codes.FailedPrecondition},
		{fmt.Errorf("%w: the only member", etcd.ErrQuorum), codes.FailedPrecondition},
		{etcd.ErrNoSnapshot, codes.FailedPrecondition},
		{fmt.Errorf("%w: abc", etcd.ErrMemberNotFound), codes.NotFound},
		{fmt.Errorf("%w: truncated", etcd.ErrBadSnapshot), codes.InvalidArgument},
		{fmt.Errorf("%w: dial", etcd.ErrNotRunning), codes.Unavailable},
		{errors.New("disk on fire"), codes.Internal},
	}

	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			sink := &logtest.Sink{}
			s := New(Config{Etcd: func() (Etcd, error) { return failingEtcd{tt.err}, nil }, Logger: sink.Logger()})
			ctx := context.Background()

			for name, call := range map[string]func() error{
				"Bootstrap":      func() error { _, err := s.Bootstrap(ctx, &machine.BootstrapRequest{}); return err },
				"EtcdMemberList": func() error { _, err := s.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{}); return err },
				"EtcdStatus":     func() error { _, err := s.EtcdStatus(ctx, &emptypb.Empty{}); return err },
				"EtcdLeaveCluster": func() error {
					_, err := s.EtcdLeaveCluster(ctx, &machine.EtcdLeaveClusterRequest{})
					return err
				},
				"EtcdRemoveMemberByID": func() error {
					_, err := s.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: 1})
					return err
				},
				"EtcdDefragment": func() error { _, err := s.EtcdDefragment(ctx, &emptypb.Empty{}); return err },
				"EtcdAlarmList":  func() error { _, err := s.EtcdAlarmList(ctx, &emptypb.Empty{}); return err },
			} {
				err := call()
				if status.Code(err) != tt.code {
					t.Errorf("%s: %v, want %s", name, err, tt.code)
				}

				if tt.code == codes.Internal {
					checkInternal(t, sink, err, name, "disk on fire")
				}
			}
		})
	}
}

func TestEtcdWithoutEtcd(t *testing.T) {
	s := New(Config{})

	if _, err := s.EtcdMemberList(context.Background(), &machine.EtcdMemberListRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("EtcdMemberList on a node without etcd: %v, want FailedPrecondition", err)
	}

	s = New(Config{Etcd: func() (Etcd, error) { return failingEtcd{}, nil }})
	if _, err := s.EtcdRemoveMemberByID(context.Background(), &machine.EtcdRemoveMemberByIDRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("EtcdRemoveMemberByID without an ID: %v, want InvalidArgument", err)
	}
}
