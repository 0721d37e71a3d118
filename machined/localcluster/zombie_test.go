package localcluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaderExitsEnv makes this test binary, run again as a child, end its
// first thread alone and keep another running: a process whose leader is
// a zombie while its other threads (and its files) live on.
const leaderExitsEnv = "AEGIS_TEST_LEADER_EXITS"

func init() {
	if os.Getenv(leaderExitsEnv) == "1" {
		// The main goroutine stays on the first thread, which TestMain ends.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(leaderExitsEnv) == "1" {
		go func() {
			runtime.LockOSThread()
			select {}
		}()

		time.Sleep(100 * time.Millisecond)

		// Only this thread exits (SYS_EXIT, not exit_group).
		_, _, _ = syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	}

	os.Exit(m.Run())
}

// TestZombieLeaderStillRuns: a machined whose first thread has exited
// while the others still run holds its files, its listeners among them;
// its command line reads empty, and it must not be taken for gone until
// its last thread has exited.
func TestZombieLeaderStillRuns(t *testing.T) {
	c := &Cluster{Name: "t", Dir: t.TempDir()}
	n := Node{Name: "t-controlplane-1"}

	cmd := exec.Command(os.Args[0], "-test.run=^$", c.StatePath(n))
	cmd.Env = append(os.Environ(), leaderExitsEnv+"=1")

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	n.PID = cmd.Process.Pid
	reaped := false

	t.Cleanup(func() {
		if !reaped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	stat := filepath.Join("/proc", strconv.Itoa(n.PID), "stat")

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b[bytes.LastIndexByte(b, ')')+1:])), "Z") {
			break
		}

		if time.Now().After(deadline) {
			t.Fatal("the child's first thread did not exit")
		}
	}

	if threads(n.PID) < 2 {
		t.Fatalf("the child has %d threads left, want its others still running", threads(n.PID))
	}

	if !c.running(n) || c.exited(n) {
		t.Fatal("a machined whose first thread exited while the others run was taken for gone")
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	for deadline := time.Now().Add(10 * time.Second); c.running(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a machined killed whole still looks as if it runs")
		}
	}

	reaped = true

	if err := cmd.Wait(); err == nil {
		t.Fatal("the killed child ended without an error")
	}
}
