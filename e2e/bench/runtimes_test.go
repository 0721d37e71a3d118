package bench

import (
	"os/exec"
	"path/filepath"
	"testing"
)

func TestProcessesUnderFindsByArgument(t *testing.T) {
	dir := t.TempDir()

	cmd := exec.Command("sh", "-c", "sleep 30; true", filepath.Join(dir, "node", "state"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	found := func(d string) bool {
		ps, err := processesUnder(d)
		if err != nil {
			t.Fatal(err)
		}

		for _, p := range ps {
			if p.pid == cmd.Process.Pid {
				return true
			}
		}

		return false
	}

	if !found(dir) {
		t.Fatalf("process %d naming a path under %s not found", cmd.Process.Pid, dir)
	}

	if found(dir + "x") { // a sibling whose name begins the same is not under it
		t.Fatalf("process %d found under %sx", cmd.Process.Pid, dir)
	}
}

func TestArgAfter(t *testing.T) {
	args := []string{"containerd-shim-runc-v2", "-namespace", "system", "-id", "apid", "-address", "/s/containerd.sock"}
	if got := argAfter(args, "-id"); got != "apid" {
		t.Fatalf("argAfter -id = %q", got)
	}

	if got := argAfter(args[:4], "-id"); got != "" {
		t.Fatalf("argAfter of a last flag = %q, want empty", got)
	}
}
