package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrNoContainer is the answer for a container the namespace does not hold.
var ErrNoContainer = errors.New("containerd: no such container")

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Containers lists the containers of namespace with their task's PID and
// status (a container without a task is "CREATED").
func (d *Daemon) Containers(ctx context.Context, namespace string) ([]*machine.ContainerInfo, error) {
	ctx = namespaces.WithNamespace(ctx, namespace)

	ctrs, err := d.client.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd: listing containers: %w", err)
	}

	out := make([]*machine.ContainerInfo, 0, len(ctrs))

	for _, c := range ctrs {
		info := &machine.ContainerInfo{Namespace: namespace, Id: c.ID(), InternalId: c.ID(), Name: c.ID(), Status: "CREATED"}

		if img, err := c.Image(ctx); err == nil {
			info.Image = img.Name()
		}

		if task, err := c.Task(ctx, nil); err == nil {
			info.Pid = task.Pid()

			if st, err := task.Status(ctx); err == nil {
				info.Status = strings.ToUpper(string(st.Status))
			}
		}

		out = append(out, info)
	}

	return out, nil
}

// Stats reads the memory in use and the CPU time used (nanoseconds) of
// each running container of namespace from its cgroup.
func (d *Daemon) Stats(ctx context.Context, namespace string) ([]*machine.Stat, error) {
	ctx = namespaces.WithNamespace(ctx, namespace)

	ctrs, err := d.client.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd: listing containers: %w", err)
	}

	var out []*machine.Stat

	for _, c := range ctrs {
		spec, err := c.Spec(ctx)
		if err != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" {
			continue
		}

		if _, err := c.Task(ctx, nil); err != nil {
			continue
		}

		mem, cpu := cgroupUsage(spec.Linux.CgroupsPath)
		out = append(out, &machine.Stat{Namespace: namespace, Id: c.ID(), Name: c.ID(), MemoryUsage: mem, CpuUsage: cpu})
	}

	return out, nil
}

// cgroupUsage reads a cgroup's memory in use (bytes) and CPU time
// (nanoseconds), from cgroup v1's memory and cpuacct controllers or from
// cgroup v2; what cannot be read is zero.
func cgroupUsage(path string) (memory, cpu uint64) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		memory = readUint(filepath.Join(cgroupRoot, path, "memory.current"))

		stat, _ := os.ReadFile(filepath.Join(cgroupRoot, path, "cpu.stat"))
		for _, line := range strings.Split(string(stat), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				usec, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				cpu = usec * 1000
			}
		}

		return memory, cpu
	}

	return readUint(filepath.Join(cgroupRoot, "memory", path, "memory.usage_in_bytes")),
		readUint(filepath.Join(cgroupRoot, "cpuacct", path, "cpuacct.usage"))
}

func readUint(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}

	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)

	return v
}

// Restart stops the task of container id with SIGTERM: the runner that
// started it starts it again under its restart policy.
func (d *Daemon) Restart(ctx context.Context, namespace, id string) error {
	ctx = namespaces.WithNamespace(ctx, namespace)

	c, err := d.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s in namespace %s", ErrNoContainer, id, namespace)
	}

	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}

	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s has no running task", ErrNoContainer, id)
	}

	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}

	if err := task.Kill(ctx, syscall.SIGTERM); err != nil {
		return fmt.Errorf("containerd: stopping %s: %w", id, err)
	}

	return nil
}

// Images lists the images of namespace.
func (d *Daemon) Images(ctx context.Context, namespace string) ([]*machine.ImageListResponse, error) {
	ctx = namespaces.WithNamespace(ctx, namespace)

	imgs, err := d.client.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd: listing images: %w", err)
	}

	out := make([]*machine.ImageListResponse, 0, len(imgs))

	for _, img := range imgs {
		size, _ := img.Size(ctx)
		out = append(out, &machine.ImageListResponse{
			Name: img.Name(), Digest: img.Target().Digest.String(), Size: size,
			CreatedAt: timestamppb.New(img.Metadata().CreatedAt),
		})
	}

	return out, nil
}
