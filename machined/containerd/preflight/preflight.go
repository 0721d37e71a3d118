// Package preflight says whether a machine can run a node's services as
// containers, without the containerd client: aegisctl and machined ask it
// before anything starts.
package preflight

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Check reports what the machine lacks to run containers, in one error
// naming all of it: root, the binaries, a cgroup file system.
func Check(binary string) error {
	if binary == "" {
		binary = "containerd"
	}

	var missing []string

	if os.Geteuid() != 0 {
		missing = append(missing, "root (running as uid "+fmt.Sprint(os.Geteuid())+")")
	}

	// containerd, the shim it starts per container, the runtime the shim calls.
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		if b == "containerd" {
			b = binary
		}

		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, "the "+b+" binary (Debian: apt-get install containerd runc)")
		}
	}

	if !cgroupMounted() {
		missing = append(missing, "a cgroup file system at /sys/fs/cgroup (`ip netns exec` remounts /sys without it; enter a network namespace with `nsenter --net` instead)")
	}

	if len(missing) > 0 {
		return fmt.Errorf("containerd runtime: missing %s", strings.Join(missing, "; "))
	}

	return nil
}

// cgroupMounted reports whether runc will find cgroups: cgroup v2 at
// /sys/fs/cgroup, or v1 hierarchies below it.
func cgroupMounted() bool {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return true
	}

	_, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes")

	return err == nil
}
