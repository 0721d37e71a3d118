package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/ociimage"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/containerd"
	"github.com/aegis-os/aegis/machined/containerd/preflight"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// needContainerd skips a test on a machine that cannot run containers:
// not root, or containerd, its shim or runc missing (make deps installs
// them), or no cgroup file system (`ip netns exec` hides it).
func needContainerd(t *testing.T) {
	t.Helper()
	needImages(t)

	if err := preflight.Check(""); err != nil {
		t.Skipf("containerd test skipped: %v", err)
	}
}

// containerdCluster creates a cluster on the containerd runtime,
// destroyed when the test ends.
func containerdCluster(t *testing.T, name, cidr string, workers int) *localcluster.Cluster {
	t.Helper()

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: name, ControlPlanes: 1, Workers: workers, CIDR: netip.MustParsePrefix(cidr),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: faultTimeout, Runtime: certs.RuntimeContainerd,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 40))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return c
}

// nodeContainerd is a client of a node's own containerd.
func nodeContainerd(t *testing.T, state string) *containerd.Daemon {
	t.Helper()

	d, err := containerd.New(containerd.Config{Dir: filepath.Join(state, "containerd")})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { d.Close() })

	return d
}

// taskPID is the PID of a running container's process.
func taskPID(ctx context.Context, c *client.Client, id string) (int, error) {
	ctr, err := c.LoadContainer(ctx, id)
	if err != nil {
		return 0, err
	}

	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return 0, err
	}

	st, err := task.Status(ctx)
	if err != nil {
		return 0, err
	}

	if st.Status != client.Running {
		return 0, fmt.Errorf("%s is %s", id, st.Status)
	}

	return int(task.Pid()), nil
}

// statusFields reads the fields of /proc/PID/status.
func statusFields(t *testing.T, pid int) map[string]string {
	t.Helper()

	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}

	out := map[string]string{}

	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}

	return out
}

// memoryLimit reads the memory limit of pid's cgroup (v1 or v2).
func memoryLimit(t *testing.T, pid int) string {
	t.Helper()

	return cgroupValue(t, pid, "memory", "memory.limit_in_bytes", "memory.max")
}

// cgroupValue reads a file of pid's cgroup: v1file under the v1
// controller's hierarchy, or v2file in the unified one.
func cgroupValue(t *testing.T, pid int, controller, v1file, v2file string) string {
	t.Helper()

	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}

	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}

		switch {
		case slices.Contains(strings.Split(parts[1], ","), controller):
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, parts[2], v1file))
			if err == nil {
				return strings.TrimSpace(string(b))
			}
		case parts[0] == "0" && parts[1] == "":
			if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[2], v2file)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
	}

	t.Fatalf("no %s cgroup for %d", controller, pid)

	return ""
}

// cpuWeight is the CPU weight of pid's cgroup that the test expects: the
// default, or etcd's (runner.SharesOfNice of etcd.Nice) when raised, as
// cpu.shares on cgroup v1 and as the cpu.weight runc converts it to on v2.
func cpuWeight(pid int, raised bool) string {
	v2 := !strings.Contains(readFile(fmt.Sprintf("/proc/%d/cgroup", pid)), ":cpu")

	switch {
	case !raised && v2:
		return "100"
	case !raised:
		return "1024"
	case v2:
		shares := runner.SharesOfNice(etcd.Nice)

		return strconv.FormatUint(1+((shares-2)*9999)/262142, 10)
	default:
		return strconv.FormatUint(runner.SharesOfNice(etcd.Nice), 10)
	}
}

// readFile is path's content, or "" when it cannot be read.
func readFile(path string) string {
	data, _ := os.ReadFile(path)

	return string(data)
}

// openFilesLimit is the soft and hard limit on open files of process pid,
// from /proc/PID/limits.
func openFilesLimit(t *testing.T, pid int) string {
	t.Helper()

	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}

	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return f[0] + " " + f[1]
			}
		}
	}

	t.Fatalf("no open files limit in /proc/%d/limits", pid)

	return ""
}

// rootReadOnly reports whether pid's root mount is read-only.
func rootReadOnly(t *testing.T, pid int) bool {
	t.Helper()

	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}

	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return strings.Split(f[5], ",")[0] == "ro"
		}
	}

	t.Fatalf("no root mount for %d", pid)

	return false
}

// sees reports whether pid, in its own mount namespace, finds path.
func sees(pid int, path string) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, path))

	return err == nil
}

func TestContainerdConfinement(t *testing.T) {
	needContainerd(t)

	c := containerdCluster(t, "confined", "127.4.16.0/24", 0)
	cp := c.Nodes[0]
	state := c.StatePath(cp)
	l := layout.Layout{State: state}
	d := nodeContainerd(t, state)

	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()

	// What each service must see of the node's sockets, and must not.
	others := map[string][]string{
		"apid":   {l.TrustdResources(), l.TokensSocket(), l.EtcdDir()},
		"trustd": {l.APIDResources(), l.MachinedSocket()},
		"etcd":   {l.APIDResources(), l.MachinedSocket(), l.TrustdResources(), l.TokensSocket(), l.PKIDir()},
	}
	own := map[string][]string{
		"apid":   {l.APIDResources(), l.MachinedSocket()},
		"trustd": {l.TrustdResources(), l.TokensSocket()},
		"etcd":   {filepath.Join(l.EtcdDir(), "data", "member")},
	}
	limits := map[string]int{"apid": 256 << 20, "trustd": 768 << 20, "etcd": 512 << 20}

	waitFor(t, "etcd running", func() error { _, err := taskPID(ctx, d.Client(), "etcd"); return err })

	for _, id := range []string{"apid", "trustd", "etcd"} {
		t.Run(id, func(t *testing.T) {
			pid, err := taskPID(ctx, d.Client(), id)
			if err != nil {
				t.Fatal(err)
			}

			st := statusFields(t, pid)
			if uid := strings.Fields(st["Uid"]); uid[0] == "0" || uid[1] == "0" {
				t.Errorf("%s runs as uid %s", id, st["Uid"])
			}

			if st["CapEff"] != "0000000000000000" || st["CapPrm"] != "0000000000000000" || st["CapBnd"] != "0000000000000000" {
				t.Errorf("%s has capabilities: eff %s prm %s bnd %s", id, st["CapEff"], st["CapPrm"], st["CapBnd"])
			}

			if st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" {
				t.Errorf("%s: NoNewPrivs %s, Seccomp %s", id, st["NoNewPrivs"], st["Seccomp"])
			}

			if got := memoryLimit(t, pid); got != strconv.Itoa(limits[id]) {
				t.Errorf("%s memory limit %s", id, got)
			}

			// The limit on tasks is the node's containerPidsLimit.
			if got := cgroupValue(t, pid, "pids", "pids.max", "pids.max"); got != "1024" {
				t.Errorf("%s: pids.max %s, want 1024", id, got)
			}

			t.Logf("%s: %s tasks", id, cgroupValue(t, pid, "pids", "pids.current", "pids.current"))

			// etcd's cgroup weighs as its process would at etcd.Nice.
			if got, want := cgroupValue(t, pid, "cpu", "cpu.shares", "cpu.weight"), cpuWeight(pid, id == "etcd"); got != want {
				t.Errorf("%s: CPU weight %s, want %s", id, got, want)
			}

			if got := openFilesLimit(t, pid); got != "16384 16384" {
				t.Errorf("%s: open files limit (soft hard) %s, want 16384 16384", id, got)
			}

			if !rootReadOnly(t, pid) {
				t.Errorf("%s: root file system writable", id)
			}

			for _, p := range own[id] {
				if !sees(pid, p) {
					t.Errorf("%s does not see its own %s", id, p)
				}
			}

			for _, p := range others[id] {
				if sees(pid, p) {
					t.Errorf("%s sees %s", id, p)
				}
			}

			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if !strings.Contains(string(env), "GOMEMLIMIT=") {
				t.Errorf("%s has no GOMEMLIMIT: %q", id, env)
			}
		})
	}

	// The fresh node imported its three images one at a time: imports
	// made at once lock each other out of containerd's one ingest
	// reference for an archive's index.json, and wait in backoff.
	t.Run("images imported without lock waits", func(t *testing.T) {
		data, err := os.ReadFile(l.ServiceLog("containerd"))
		if err != nil {
			t.Fatal(err)
		}

		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "locked for") {
				t.Errorf("an import waited for another's lock:\n%s", line)
			}
		}
	})
}

func TestContainerdRestarts(t *testing.T) {
	needContainerd(t)

	c := containerdCluster(t, "restarts", "127.4.17.0/24", 0)
	cp := c.Nodes[0]
	state := c.StatePath(cp)
	d := nodeContainerd(t, state)
	conn := clusterAdmin(t, c).conn(t, cp.Address)

	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()

	t.Run("API", func(t *testing.T) {
		checkContainerAPI(ctx, t, machine.NewMachineServiceClient(conn), d)
	})

	t.Run("container process killed", func(t *testing.T) {
		pid, err := taskPID(ctx, d.Client(), "trustd")
		if err != nil {
			t.Fatal(err)
		}

		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}

		waitFor(t, "trustd restarted", func() error {
			again, err := taskPID(ctx, d.Client(), "trustd")
			if err != nil {
				return err
			}

			if again == pid {
				return fmt.Errorf("still process %d", pid)
			}

			return servicesUp(ctx, conn)
		})
	})

	t.Run("containerd killed", func(t *testing.T) {
		pid := containerdPID(t, state)
		apid, err := taskPID(ctx, d.Client(), "apid")
		if err != nil {
			t.Fatal(err)
		}

		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}

		killed := time.Now()

		waitFor(t, "services back after containerd was killed", func() error {
			if again := containerdPID(t, state); again == 0 || again == pid {
				return fmt.Errorf("containerd not restarted")
			}

			if again, err := taskPID(ctx, d.Client(), "apid"); err != nil || again == apid {
				return fmt.Errorf("apid not restarted: %v", err)
			}

			return servicesUp(ctx, conn)
		})

		back := time.Since(killed)
		t.Logf("containerd killed: services healthy again after %s", back.Round(time.Millisecond))

		if back > 10*time.Second {
			t.Errorf("services took %s to come back, want at most 10s", back)
		}
	})
}

// containerdPID finds the containerd process of the node whose state is
// state, or 0.
func containerdPID(t *testing.T, state string) int {
	t.Helper()

	want := filepath.Join(state, "containerd", "config.toml")
	entries, _ := os.ReadDir("/proc")

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), want) && !strings.Contains(string(cmdline), "shim") {
			if s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(s), ") Z ") {
				return pid
			}
		}
	}

	return 0
}

// TestContainerdBadArchive boots a control plane on the containerd runtime
// with a damaged, then a missing, apid image archive: the boot fails naming
// the file, and containerd never starts, so nothing of it is imported.
func TestContainerdBadArchive(t *testing.T) {
	needContainerd(t)

	dir := testutil.ShortTempDir(t)
	cp, _ := genConfigs(t, dir)

	cfg, err := certs.LoadMachineConfig(cp, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	cfg.Machine.Runtime = certs.RuntimeContainerd
	if err := cfg.Save(cp, true); err != nil {
		t.Fatal(err)
	}

	good, err := os.ReadFile(filepath.Join(binDir, "images", "apid.tar"))
	if err != nil {
		t.Fatal(err)
	}

	for name, archive := range map[string][]byte{"damaged": good[:len(good)-4096], "missing": nil} {
		t.Run(name, func(t *testing.T) {
			images := filepath.Join(dir, name+"-images")
			if err := os.MkdirAll(images, 0o755); err != nil {
				t.Fatal(err)
			}

			path := filepath.Join(images, "apid.tar")
			if archive != nil {
				if err := os.WriteFile(path, archive, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			state := filepath.Join(dir, name+"-state")
			p := startMachinedWith(t, cp, state, "--image-dir", images)

			waitLog(t, p, `"msg":"boot failed"`)

			if !strings.Contains(p.out.String(), path) {
				t.Fatalf("the boot failure does not name %s:\n%s", path, p.out.String())
			}

			if _, err := os.Stat(filepath.Join(state, "containerd", "root")); err == nil {
				t.Fatal("containerd ran although the boot failed")
			}
		})
	}
}

// checkContainerAPI lists the containers, their stats and the images
// through apid, and restarts trustd's container through it.
func checkContainerAPI(ctx context.Context, t *testing.T, mc machine.MachineServiceClient, d *containerd.Daemon) {
	t.Helper()

	list, err := mc.Containers(ctx, &machine.ContainersRequest{Namespace: "system"})
	if err != nil {
		t.Fatal(err)
	}

	pids := map[string]uint32{}
	for _, c := range list.GetMessages()[0].GetContainers() {
		pids[c.GetId()] = c.GetPid()
	}

	trustd, err := taskPID(ctx, d.Client(), "trustd")
	if err != nil || pids["trustd"] != uint32(trustd) || pids["apid"] == 0 {
		t.Fatalf("Containers: %v (trustd's task %d, %v)", pids, trustd, err)
	}

	stats, err := mc.Stats(ctx, &machine.StatsRequest{Namespace: "system"})
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range stats.GetMessages()[0].GetStats() {
		if s.GetMemoryUsage() == 0 || s.GetCpuUsage() == 0 {
			t.Errorf("Stats of %s: memory %d, CPU %d", s.GetId(), s.GetMemoryUsage(), s.GetCpuUsage())
		}
	}

	images, err := mc.ImageList(ctx, &machine.ImageListRequest{Namespace: common.ContainerdNamespace_NS_SYSTEM})
	if err != nil {
		t.Fatal(err)
	}

	var names []string

	for {
		img, err := images.Recv()
		if err != nil {
			break
		}

		names = append(names, img.GetName())
	}

	if !slices.Contains(names, ociimage.ImageName("apid")) || !slices.Contains(names, ociimage.ImageName("trustd")) {
		t.Errorf("ImageList: %v", names)
	}

	if _, err := mc.Restart(ctx, &machine.RestartRequest{Namespace: "system", Id: "trustd"}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "trustd restarted through the API", func() error {
		again, err := taskPID(ctx, d.Client(), "trustd")
		if err != nil || again == trustd {
			return fmt.Errorf("trustd's process %d, %v", again, err)
		}

		return nil
	})
}
