package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/aegis-os/aegis/internal/ociimage"
	"github.com/aegis-os/aegis/machined/containerd"
	"github.com/aegis-os/aegis/machined/containerd/preflight"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// Confinement of the services run as containers.
const (
	// containerMemoryLimit bounds apid's cgroup: several times what it
	// uses under the floods of the e2e tests, so only a leak reaches it.
	// Each container's GOMEMLIMIT is 80 % of its limit (goMemLimit): the
	// Go runtime collects harder before the cgroup's limit is reached.
	// The process runtime gives apid and trustd the same GOMEMLIMIT,
	// without a cgroup.
	containerMemoryLimit = 256 << 20
	// trustdMemoryLimit bounds trustd's cgroup. trustd holds a connection
	// for each worker it serves, up to its tables
	// (trustd.MemoryAtFullTables, 454 MiB live), and its GOMEMLIMIT is
	// a quarter above that, so that the collector has room to work at
	// full tables instead of running all the time. trustd's heap grows
	// by at most trustd.GCRoom beyond what it holds between collections,
	// so its memory follows what it serves rather than this limit.
	trustdMemoryLimit = 768 << 20
	// etcdMemoryLimit bounds etcd's cgroup: its backend is memory-mapped
	// and grows with the data; a few hundred MiB hold far more than a
	// node's tokens and membership.
	etcdMemoryLimit = 512 << 20
	// containerPidsLimit bounds the tasks (processes and threads) of each
	// container's cgroup. The services never fork; a Go program's threads
	// are about one per CPU (GOMAXPROCS) plus one per system call blocked
	// in the kernel (file I/O, etcd's fsyncs), a few dozen on this
	// machine under the floods of the e2e tests. 1024 leaves room for
	// machines with hundreds of CPUs, while a thread leak or a fork bomb
	// in a service fails that service instead of using up the process IDs
	// of the whole node (pid_max is 32768 on many kernels).
	containerPidsLimit = 1024
	// containerOpenFiles is every container's limit on open files, where
	// containerd's default is 1024: apid admits 1024 client connections,
	// trustd 512 anonymous ones and 6,144 of the cluster's nodes (their
	// limits.go), and each also holds listeners, connections of its own
	// (apid's backends and peers, the etcd clients) and files, while a
	// connection waiting for a slot (as many again as the anonymous cap)
	// or refused at accept holds a descriptor until it is closed. Running
	// out would refuse the legitimate callers the connection caps are there
	// to protect; twice what trustd's caps admit is room for all of it,
	// and still bounded.
	containerOpenFiles = 16384
	// containerOOMScoreAdj keeps the node's API and signer among the last
	// processes the kernel kills when memory runs out, as Talos does. A
	// score below machined's own needs CAP_SYS_RESOURCE (see oomScoreAdj).
	containerOOMScoreAdj = -998
)

// oomScoreAdj is containerOOMScoreAdj if machined may set a score lower
// than its own (it holds CAP_SYS_RESOURCE), else machined's own score: the
// kernel refuses a lower one, and runc then fails to start the container.
func oomScoreAdj() int {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}

	adj, err := strconv.Atoi(strings.TrimSpace(string(own)))
	if err != nil {
		return 0
	}

	if hasCapability(capSysResource) {
		return min(adj, containerOOMScoreAdj)
	}

	return adj
}

// capSysResource is CAP_SYS_RESOURCE's bit in the capability sets.
const capSysResource = 24

// hasCapability reports whether machined's effective set holds capability bit.
func hasCapability(bit uint) bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}

	for _, line := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)

			return err == nil && v&(1<<bit) != 0
		}
	}

	return false
}

// ContainerdServiceID is the service that runs the node's containerd.
const ContainerdServiceID = "containerd"

// containerRuntime is what a node that runs its services as containers
// holds: its containerd and the images verified at this boot.
type containerRuntime struct {
	daemon   *containerd.Daemon
	imageDir string
	// cgroupParent keeps this node's containers apart from another node's
	// on the same machine.
	cgroupParent string
	images       map[string]ociimage.Verified
}

func newContainerRuntime(state, imageDir string) (*containerRuntime, error) {
	d, err := containerd.New(containerd.Config{Dir: filepath.Join(state, "containerd")})
	if err != nil {
		return nil, err
	}

	sum := sha256.Sum256([]byte(state))

	return &containerRuntime{
		daemon: d, imageDir: imageDir, cgroupParent: "/aegis/" + hex.EncodeToString(sum[:6]),
		images: map[string]ociimage.Verified{},
	}, nil
}

// close closes the client and removes the node's cgroup folders, which
// runc leaves once the containers in them are gone (a folder still in use
// is not removable, and stays).
func (r *containerRuntime) close() {
	r.daemon.Close() //nolint:errcheck // the node is going away

	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", r.cgroupParent))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", r.cgroupParent))

	for _, d := range dirs {
		_ = os.Remove(d)               //nolint:errcheck // best effort: in use, or never made
		_ = os.Remove(filepath.Dir(d)) //nolint:errcheck // the shared /aegis folder, once empty
	}
}

// prepare checks what containers need and verifies the image archive of
// each service in ids: a missing binary or a missing or damaged archive
// fails the boot, saying which.
func (r *containerRuntime) prepare(ids []string) error {
	if err := preflight.Check(""); err != nil {
		return err
	}

	if err := r.daemon.Prepare(); err != nil {
		return err
	}

	// The archives are read and hashed at once: each is tens of MiB, and
	// the first error in ids' order is the one reported.
	verified := make([]ociimage.Verified, len(ids))
	errs := make([]error, len(ids))

	var wg sync.WaitGroup

	for i, id := range ids {
		wg.Go(func() {
			verified[i], errs[i] = containerd.VerifyArchive(ociimage.ArchivePath(r.imageDir, id))
		})
	}

	wg.Wait()

	for i, id := range ids {
		if errs[i] != nil {
			return errs[i]
		}

		r.images[id] = verified[i]
	}

	return nil
}

// containerSpec is how one service runs as a container.
type containerSpec struct {
	rt     *containerRuntime
	id     string
	mounts []runner.Mount
	// memory is the cgroup's limit; zero means containerMemoryLimit.
	memory int64
	// pids is the cgroup's limit on tasks; zero means containerPidsLimit.
	pids int64
	// share gives the service's user the files it needs, before each start.
	share func(u ociimage.User) error
}

func (c *containerSpec) user() ociimage.User {
	svc, _ := ociimage.Lookup(c.id)

	return svc.User
}

// prepare imports the service's image if containerd lacks it and gives the
// service's user its files.
func (c *containerSpec) prepare(ctx context.Context) error {
	v, ok := c.rt.images[c.id]
	if !ok {
		return fmt.Errorf("node: no verified image for %s", c.id)
	}

	if err := c.rt.daemon.Serving(ctx); err != nil {
		return err
	}

	if err := c.rt.daemon.EnsureImage(ctx, ociimage.ArchivePath(c.rt.imageDir, c.id), v); err != nil {
		return err
	}

	if c.share == nil {
		return nil
	}

	return c.share(c.user())
}

func (c *containerSpec) runner(p *processService) runner.Runner {
	return c.runnerFor(runner.ProcessConfig{Args: p.allArgs(), Log: p.log, Clock: p.clock})
}

// runnerFor runs what p describes (its arguments, log and clock) as the
// service's container.
func (c *containerSpec) runnerFor(p runner.ProcessConfig) runner.Runner {
	return runner.Container(c.config(p))
}

// config is the container that runs what p describes, with the service's
// user, mounts and limits. A process's nice value (etcd's) becomes its
// cgroup's CPU weight: runc cannot set a nice value here.
func (c *containerSpec) config(p runner.ProcessConfig) runner.ContainerConfig {
	u := c.user()

	limit := c.memory
	if limit == 0 {
		limit = containerMemoryLimit
	}

	pids := c.pids
	if pids == 0 {
		pids = containerPidsLimit
	}

	return runner.ContainerConfig{
		Client: c.rt.daemon.Client(), ID: c.id, Image: c.rt.images[c.id].Name, Args: p.Args,
		Env: []string{goMemLimit(limit)}, UID: u.UID, GID: u.GID,
		Mounts: c.mounts, MemoryLimit: limit, PidsLimit: pids, OOMScoreAdj: oomScoreAdj(), OpenFiles: containerOpenFiles,
		CPUShares:   runner.SharesOfNice(p.Nice),
		CgroupsPath: c.rt.cgroupParent + "/" + c.id, RuncRoot: c.rt.daemon.RuncRoot(), FIFODir: c.rt.daemon.FIFODir(),
		Log: p.Log, Clock: p.Clock,
	}
}

// giveTo makes each path owned by u, nothing else.
func giveTo(u ociimage.User, paths ...string) error {
	for _, p := range paths {
		if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil {
			return fmt.Errorf("node: giving %s to %s: %w", p, u.Name, err)
		}
	}

	return nil
}

// giveTreeTo makes dir and everything under it owned by u.
func giveTreeTo(u ociimage.User, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("node: %w", err)
	}

	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		return giveTo(u, p)
	})
}

// searchable lets others pass through dir (mode 0711) without listing it,
// creating it if needed.
func searchable(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("node: %w", err)
	}

	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("node: %w", err)
	}

	return nil
}

// containerdService runs the node's containerd as a process, restarted
// forever; it is healthy once it answers.
func (n *Node) containerdService() *processService {
	path, args := n.ctr.daemon.Command()

	return &processService{
		id: ContainerdServiceID, path: path, args: args, env: containerd.Env(),
		log: n.logs[ContainerdServiceID], clock: n.clock, check: n.ctr.daemon.Serving,
	}
}

// confineAPID runs apid as a container that sees its own socket folder and
// machined's API socket, nothing else of the node.
func (n *Node) confineAPID(p *processService) {
	p.deps = append(p.deps, ContainerdServiceID)
	p.container = &containerSpec{
		rt: n.ctr, id: "apid",
		mounts: []runner.Mount{{Path: n.layout.APIDRun()}, {Path: n.layout.MachinedSocket(), ReadOnly: true}},
		share: func(u ociimage.User) error {
			return giveTo(u, n.layout.APIDRun(), n.layout.APIDResources(), n.layout.MachinedSocket())
		},
	}
}

// confineTrustd runs trustd as a container that sees its own socket folder
// and state and, with etcd on the node, the etcd folder read-only (where
// only the CA and client certificate and key are its to read).
func (n *Node) confineTrustd(p *processService, withEtcd bool) {
	mounts := []runner.Mount{{Path: n.layout.TrustdRun()}, {Path: n.layout.TrustdState()}}
	if withEtcd {
		mounts = append(mounts, runner.Mount{Path: n.layout.EtcdDir(), ReadOnly: true})
	}

	p.deps = append(p.deps, ContainerdServiceID)
	p.container = &containerSpec{
		rt: n.ctr, id: "trustd", mounts: mounts, memory: trustdMemoryLimit,
		share: func(u ociimage.User) error {
			if withEtcd {
				if err := searchable(n.layout.EtcdDir()); err != nil {
					return err
				}
			}

			if err := giveTreeTo(u, n.layout.TrustdState()); err != nil {
				return err
			}

			return giveTo(u, n.layout.TrustdRun(), n.layout.TrustdResources())
		},
	}
}

// containersAPI is the node's containerd for the container methods, nil on
// the process runtime (a nil *Daemon must not become a non-nil interface).
func (n *Node) containersAPI() machineapi.Containers {
	if n.ctr == nil {
		return nil
	}

	return n.ctr.daemon
}

// goMemLimit is the GOMEMLIMIT setting of a Go service whose memory is
// bounded by limit: 80 % of it.
func goMemLimit(limit int64) string { return "GOMEMLIMIT=" + strconv.FormatInt(limit/10*8, 10) }
