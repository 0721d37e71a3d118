package machineapi

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
)

// Containerd namespaces the container methods read: the system services',
// the default, and Kubernetes', which a node may hold later.
const (
	SystemNamespace = "system"
	CRINamespace    = "k8s.io"
)

// Containers is the node's containerd, as the container methods see it.
type Containers interface {
	Containers(ctx context.Context, namespace string) ([]*machine.ContainerInfo, error)
	Stats(ctx context.Context, namespace string) ([]*machine.Stat, error)
	Restart(ctx context.Context, namespace, id string) error
	Images(ctx context.Context, namespace string) ([]*machine.ImageListResponse, error)
}

// errNoContainerd refuses the container methods on a node that runs its
// services as processes.
var errNoContainerd = refuse(ErrNotHere, "the node runs its services as processes (machine.runtime: process): it has no containerd")

// containers returns the node's containerd and the namespace a request
// names, or why neither can be had.
func (s *Server) containers(namespace string, driver common.ContainerDriver) (Containers, string, error) {
	if driver == common.ContainerDriver_CRI {
		return nil, "", refuse(ErrNotHere, "the node has no CRI: use the containerd driver")
	}

	if s.cfg.Containers == nil {
		return nil, "", errNoContainerd
	}

	switch namespace {
	case "":
		namespace = SystemNamespace
	case SystemNamespace, CRINamespace:
	default:
		return nil, "", refusef(ErrBadRequest, "namespace %q: want %s or %s", namespace, SystemNamespace, CRINamespace)
	}

	return s.cfg.Containers, namespace, nil
}

// Containers lists the containers of a namespace.
func (s *Server) Containers(ctx context.Context, req *machine.ContainersRequest) (*machine.ContainersResponse, error) {
	c, ns, err := s.containers(req.GetNamespace(), req.GetDriver())
	if err != nil {
		return nil, s.toStatus("Containers", err)
	}

	list, err := c.Containers(ctx, ns)
	if err != nil {
		return nil, s.toStatus("Containers", err)
	}

	return &machine.ContainersResponse{Messages: []*machine.Container{{Containers: list}}}, nil
}

// Stats reports the memory and CPU use of the containers of a namespace.
func (s *Server) Stats(ctx context.Context, req *machine.StatsRequest) (*machine.StatsResponse, error) {
	c, ns, err := s.containers(req.GetNamespace(), req.GetDriver())
	if err != nil {
		return nil, s.toStatus("Stats", err)
	}

	stats, err := c.Stats(ctx, ns)
	if err != nil {
		return nil, s.toStatus("Stats", err)
	}

	return &machine.StatsResponse{Messages: []*machine.Stats{{Stats: stats}}}, nil
}

// Restart stops a container's process; the service that runs it starts it
// again.
func (s *Server) Restart(ctx context.Context, req *machine.RestartRequest) (*machine.RestartResponse, error) {
	c, ns, err := s.containers(req.GetNamespace(), req.GetDriver())
	if err == nil && req.GetId() == "" {
		err = refuse(ErrBadRequest, "restart: a container ID is required")
	}

	if err == nil {
		err = c.Restart(ctx, ns, req.GetId())
	}

	if err != nil {
		return nil, s.toStatus("Restart", err)
	}

	return &machine.RestartResponse{Messages: []*machine.Restart{{}}}, nil
}

// ImageList streams the images of a containerd namespace.
func (s *Server) ImageList(req *machine.ImageListRequest, stream grpc.ServerStreamingServer[machine.ImageListResponse]) error {
	ns := SystemNamespace
	if req.GetNamespace() == common.ContainerdNamespace_NS_CRI {
		ns = CRINamespace
	}

	c, ns, err := s.containers(ns, common.ContainerDriver_CONTAINERD)
	if err != nil {
		return s.toStatus("ImageList", err)
	}

	imgs, err := c.Images(stream.Context(), ns)
	if err != nil {
		return s.toStatus("ImageList", err)
	}

	for _, img := range imgs {
		if err := stream.Send(img); err != nil {
			return fmt.Errorf("machineapi: ImageList: %w", err)
		}
	}

	return nil
}
