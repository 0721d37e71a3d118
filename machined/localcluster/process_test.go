package localcluster

import (
	"os"
	"os/exec"
	"testing"
)

// TestJustStartedIsNotExited: right after os/exec's Start returns, the
// kernel may not yet show the new program's arguments in
// /proc/PID/cmdline, so a node just started can look like another
// process. exited must not take it for gone.
func TestJustStartedIsNotExited(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}

	c := &Cluster{Name: "t", Dir: t.TempDir()}
	n := Node{Name: "t-controlplane-1"}

	for i := range 300 {
		// The state path rides in the shell's arguments ($0), as in
		// machined's; the second command keeps the shell from exec'ing
		// sleep in its place.
		cmd := exec.Command(sh, "-c", "sleep 5; :", c.StatePath(n))

		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}

		n.PID = cmd.Process.Pid
		gone := c.exited(n)

		_ = cmd.Process.Kill()
		_ = cmd.Wait()

		if gone {
			t.Fatalf("start %d: a node just started was taken for exited", i)
		}
	}
}

// TestThreadsField: a zombie's Threads field says whether its other
// threads, which hold its files, have exited.
func TestThreadsField(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int
	}{
		{"a zombie whose other threads still exit", "Name:\tmachined\nState:\tZ (zombie)\nThreads:\t7\nSigQ:\t0/95\n", 7},
		{"a zombie alone", "Name:\tmachined\nState:\tZ (zombie)\nThreads:\t1\n", 1},
		{"no field", "Name:\tmachined\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := threadsField([]byte(tc.status)); got != tc.want {
				t.Fatalf("threadsField = %d, want %d", got, tc.want)
			}
		})
	}

	if n := threads(os.Getpid()); n < 1 {
		t.Fatalf("threads of this test's own process = %d, want at least 1", n)
	}
}
