package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// runcRuntime is the shim containerd runs each container with.
const runcRuntime = "io.containerd.runc.v2"

// cleanupTimeout bounds the removal of a container after its run, which
// goes on after the service's context ended.
const cleanupTimeout = 30 * time.Second

// Mount is a host path bound into a container at the same path.
type Mount struct {
	Path     string
	ReadOnly bool
}

// ContainerConfig describes a service run as a container. Client, ID,
// Image and a non-zero UID are required.
type ContainerConfig struct {
	// Client is the node's containerd client, with the namespace set.
	Client *client.Client
	// ID names the container (and its snapshot): the service's ID.
	ID string
	// Image is the reference of an image already imported and unpacked.
	Image string
	// Args follow the image's entrypoint.
	Args []string
	// Env is added to the image's environment.
	Env []string
	// UID and GID the process runs as; root is refused.
	UID, GID uint32
	// Mounts are the only host paths the container sees.
	Mounts []Mount
	// MemoryLimit of the container's cgroup in bytes; zero means none.
	MemoryLimit int64
	// PidsLimit is the most tasks (processes and threads) the container's
	// cgroup may hold (pids.max); zero means none, so that a thread leak
	// or a fork bomb in the service may use up the node's process IDs.
	PidsLimit int64
	// OOMScoreAdj of the process.
	OOMScoreAdj int
	// CPUShares is the weight of the container's cgroup when the CPU is
	// short, against its siblings' (cpu.shares, whose default is 1024;
	// runc turns it into cpu.weight on cgroup v2). Zero keeps the default.
	CPUShares uint64
	// OpenFiles is the process's limit on open files (RLIMIT_NOFILE, soft
	// and hard alike). Zero keeps containerd's default, 1024, which is
	// below what a server admitting 1024 connections needs.
	OpenFiles uint64
	// CgroupsPath is the container's cgroup; empty means containerd's
	// default (namespace/ID), which two nodes on one machine would share.
	CgroupsPath string
	// RuncRoot is runc's state directory for this node's containers.
	RuncRoot string
	// FIFODir holds the pipes of stdout and stderr.
	FIFODir string
	// Log receives stdout and stderr. Nil discards them.
	Log io.Writer
	// GracePeriod between SIGTERM and SIGKILL; zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// Clock times the grace period. Nil means the system clock.
	Clock clock.Clock
}

type container struct {
	cfg ContainerConfig
}

// Container returns a runner that runs a service as a container of the
// node's containerd, confined: host network, its own user, no
// capabilities, no new privileges, a read-only root file system,
// containerd's default seccomp profile, a memory limit and only the
// configured host paths. Each run starts from a fresh container; one left
// over by an earlier run (machined or containerd died) is removed first.
func Container(cfg ContainerConfig) Runner {
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Log = defaults.Output(cfg.Log)

	return &container{cfg: cfg}
}

func (c *container) String() string {
	return "container " + c.cfg.ID + " (" + c.cfg.Image + ") " + strings.Join(c.cfg.Args, " ")
}

func (c *container) Run(ctx context.Context, notify Notify) error {
	if c.cfg.Client == nil || c.cfg.ID == "" || c.cfg.Image == "" || c.cfg.UID == 0 {
		return errors.New("runner: a container needs a client, an ID, an image and a user other than root")
	}

	notify(false, "waiting for containerd")

	if _, err := c.cfg.Client.IsServing(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}

		return fmt.Errorf("runner: containerd: %w", err)
	}

	if err := removeContainer(ctx, c.cfg.Client, c.cfg.ID); err != nil {
		return err
	}

	ctr, err := c.create(ctx)
	if err != nil {
		return err
	}
	defer removeContainer(context.WithoutCancel(ctx), c.cfg.Client, c.cfg.ID) //nolint:errcheck // the next run removes it again

	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, c.cfg.Log, c.cfg.Log), cio.WithFIFODir(c.cfg.FIFODir)))
	if err != nil {
		return fmt.Errorf("runner: %s: task: %w", c.cfg.ID, err)
	}

	exited, err := task.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("runner: %s: %w", c.cfg.ID, err)
	}

	if err := task.Start(ctx); err != nil {
		return fmt.Errorf("runner: %s: start: %w", c.cfg.ID, err)
	}

	notify(true, fmt.Sprintf("container %s: process %d started", c.cfg.ID, task.Pid()))

	select {
	case st := <-exited:
		return exitError(c.cfg.ID, st)
	case <-ctx.Done():
		return c.stop(task, exited)
	}
}

func exitError(id string, st client.ExitStatus) error {
	code, _, err := st.Result()
	if err != nil {
		return fmt.Errorf("runner: %s: %w", id, err)
	}

	if code != 0 {
		return fmt.Errorf("runner: %s: exit status %d", id, code)
	}

	return nil
}

// stop sends SIGTERM and SIGKILL after the grace period.
func (c *container) stop(task client.Task, exited <-chan client.ExitStatus) error {
	ctx := context.Background()

	if err := task.Kill(ctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("runner: %s: SIGTERM: %w", c.cfg.ID, err)
	}

	grace := c.cfg.Clock.NewTimer(c.cfg.GracePeriod)
	defer grace.Stop()

	select {
	case <-exited:
		return nil
	case <-grace.C():
	}

	if err := task.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("runner: %s: SIGKILL: %w", c.cfg.ID, err)
	}

	<-exited

	return nil
}

func (c *container) create(ctx context.Context) (client.Container, error) {
	img, err := c.cfg.Client.GetImage(ctx, c.cfg.Image)
	if err != nil {
		return nil, fmt.Errorf("runner: %s: image %s: %w", c.cfg.ID, c.cfg.Image, err)
	}

	ctr, err := c.cfg.Client.NewContainer(ctx, c.cfg.ID,
		client.WithImage(img),
		client.WithNewSnapshot(c.cfg.ID, img),
		client.WithRuntime(runcRuntime, &options.Options{Root: c.cfg.RuncRoot}),
		client.WithNewSpec(c.spec(img)...),
	)
	if err != nil {
		return nil, fmt.Errorf("runner: %s: creating the container: %w", c.cfg.ID, err)
	}

	return ctr, nil
}

// spec is the container's OCI spec, from containerd's defaults (which
// already unshare pid, ipc, uts and mount namespaces) tightened.
func (c *container) spec(img client.Image) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithImageConfigArgs(img, c.cfg.Args),
		oci.WithEnv(c.cfg.Env),
		oci.WithUIDGID(c.cfg.UID, c.cfg.GID),
		oci.WithHostNamespace(specs.NetworkNamespace),
		oci.WithRootFSReadonly(),
		oci.WithNoNewPrivileges,
		withoutCapabilities,
		withoutCgroupFS,
		seccomp.WithDefaultProfile(),
		oci.WithMounts(bindMounts(c.cfg.Mounts)),
		withOOMScoreAdj(c.cfg.OOMScoreAdj),
	}

	return append(opts, c.limits()...)
}

// limits are the spec's resource limits and the container's cgroup: the
// part of the spec that needs no image.
func (c *container) limits() []oci.SpecOpts {
	var opts []oci.SpecOpts

	if c.cfg.MemoryLimit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(c.cfg.MemoryLimit)))
	}

	if c.cfg.PidsLimit > 0 {
		opts = append(opts, oci.WithPidsLimit(c.cfg.PidsLimit))
	}

	if c.cfg.CPUShares > 0 {
		opts = append(opts, oci.WithCPUShares(c.cfg.CPUShares))
	}

	if c.cfg.CgroupsPath != "" {
		opts = append(opts, oci.WithCgroup(c.cfg.CgroupsPath))
	}

	if c.cfg.OpenFiles > 0 {
		opts = append(opts, oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: c.cfg.OpenFiles, Soft: c.cfg.OpenFiles}))
	}

	return opts
}

func bindMounts(ms []Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))

	for _, m := range ms {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}

		out = append(out, specs.Mount{
			Type: "bind", Source: m.Path, Destination: m.Path,
			Options: []string{"rbind", mode, "nosuid", "nodev", "noexec"},
		})
	}

	return out
}

// withoutCapabilities empties every capability set.
func withoutCapabilities(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Process == nil {
		s.Process = &specs.Process{}
	}

	s.Process.Capabilities = &specs.LinuxCapabilities{}

	return nil
}

// withoutCgroupFS drops the cgroup file system from the mounts: a service
// has no use for it.
func withoutCgroupFS(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	kept := s.Mounts[:0]

	for _, m := range s.Mounts {
		if m.Destination != "/sys/fs/cgroup" {
			kept = append(kept, m)
		}
	}

	s.Mounts = kept

	return nil
}

func withOOMScoreAdj(adj int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.OOMScoreAdj = &adj

		return nil
	}
}

// removeContainer kills and removes container id and its snapshot, if it
// exists.
func removeContainer(ctx context.Context, c *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()

	ctr, err := c.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}

	if err != nil {
		return fmt.Errorf("runner: %s: %w", id, err)
	}

	if task, err := ctr.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("runner: %s: removing the task: %w", id, err)
		}
	}

	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("runner: %s: removing the container: %w", id, err)
	}

	return nil
}
