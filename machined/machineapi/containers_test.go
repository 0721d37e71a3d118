package machineapi

import (
	"context"
	"fmt"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/machined/containerd"
)

// fakeContainers holds one container, "apid", in the system namespace.
type fakeContainers struct{ restarted []string }

func (f *fakeContainers) Containers(_ context.Context, ns string) ([]*machine.ContainerInfo, error) {
	if ns != SystemNamespace {
		return nil, nil
	}

	return []*machine.ContainerInfo{{Namespace: ns, Id: "apid", Pid: 42, Status: "RUNNING"}}, nil
}

func (f *fakeContainers) Stats(_ context.Context, ns string) ([]*machine.Stat, error) {
	return []*machine.Stat{{Namespace: ns, Id: "apid", MemoryUsage: 1 << 20, CpuUsage: 5}}, nil
}

func (f *fakeContainers) Restart(_ context.Context, ns, id string) error {
	if id != "apid" || ns != SystemNamespace {
		return fmt.Errorf("%w: %s", containerd.ErrNoContainer, id)
	}

	f.restarted = append(f.restarted, id)

	return nil
}

func (f *fakeContainers) Images(context.Context, string) ([]*machine.ImageListResponse, error) {
	return []*machine.ImageListResponse{{Name: "aegis.local/system/apid:current"}}, nil
}

func TestContainerMethods(t *testing.T) {
	fake := &fakeContainers{}
	s := New(Config{Containers: fake})
	ctx := context.Background()

	list, err := s.Containers(ctx, &machine.ContainersRequest{})
	if err != nil || list.Messages[0].Containers[0].GetId() != "apid" {
		t.Fatalf("Containers = %v, %v", list, err)
	}

	stats, err := s.Stats(ctx, &machine.StatsRequest{Namespace: "system"})
	if err != nil || stats.Messages[0].Stats[0].GetMemoryUsage() != 1<<20 {
		t.Fatalf("Stats = %v, %v", stats, err)
	}

	if _, err := s.Restart(ctx, &machine.RestartRequest{Id: "apid"}); err != nil || len(fake.restarted) != 1 {
		t.Fatalf("Restart: %v, restarted %v", err, fake.restarted)
	}

	for name, tt := range map[string]struct {
		call func() error
		want codes.Code
	}{
		"unknown container": {func() error { _, err := s.Restart(ctx, &machine.RestartRequest{Id: "etcd"}); return err }, codes.NotFound},
		"no container ID":   {func() error { _, err := s.Restart(ctx, &machine.RestartRequest{}); return err }, codes.InvalidArgument},
		"unknown namespace": {func() error {
			_, err := s.Containers(ctx, &machine.ContainersRequest{Namespace: "default"})
			return err
		}, codes.InvalidArgument},
		"CRI driver": {func() error {
			_, err := s.Stats(ctx, &machine.StatsRequest{Driver: common.ContainerDriver_CRI})
			return err
		}, codes.FailedPrecondition},
		"no containerd": {func() error {
			_, err := New(Config{}).Containers(ctx, &machine.ContainersRequest{})
			return err
		}, codes.FailedPrecondition},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tt.call(); status.Code(err) != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
		})
	}
}
