package localcluster

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
)

// TestBootStatusFrom reads a node's boot from its machined log: the last
// phase, a readiness, a failure, and a join whose token trustd refused,
// shown as the node's stage with the refusal (it may heal: not a failure).
func TestBootStatusFrom(t *testing.T) {
	const (
		phase   = `{"msg":"boot phase","phase":"services"}` + "\n"
		ready   = `{"msg":"node ready"}` + "\n"
		failed  = `{"msg":"boot failed","phase":"config","error":"bad config"}` + "\n"
		refused = `{"level":"ERROR","msg":"` + join.MsgTokenRefused + `","error":"trustd refused the node's token: … (127.5.0.2:50001: trustd: token expired)"}` + "\n"
	)

	for _, tt := range []struct {
		name, log, want, failed string
		ready                   bool
	}{
		{name: "booting", log: phase, want: "boot phase: services"},
		{name: "ready", log: phase + ready, want: "ready", ready: true},
		{name: "failed", log: phase + failed, want: "boot phase: services", failed: "phase config: bad config"},
		{name: "token refused", log: phase + refused + refused,
			want: "join refused: trustd refused the node's token: … (127.5.0.2:50001: trustd: token expired)"},
		{name: "booted again after a refusal", log: phase + refused + phase + ready, want: "ready", ready: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cluster{Dir: t.TempDir()}
			n := Node{Name: "c-worker-1"}

			if err := os.MkdirAll(c.nodeDir(n), 0o700); err != nil {
				t.Fatal(err)
			}

			if err := os.WriteFile(c.LogPath(n), []byte(tt.log), 0o600); err != nil {
				t.Fatal(err)
			}

			st := c.bootStatusFrom(n, 0)
			if st.text != tt.want || st.ready != tt.ready || st.failed != tt.failed {
				t.Fatalf("status %+v, want text %q, ready %v, failed %q", st, tt.want, tt.ready, tt.failed)
			}
		})
	}
}

// TestBootWatchLook: a look waits only for the nodes asked for (the first
// control plane, before the bootstrap), shows each node's stage once, and
// fails on any node of the cluster whose boot failed, asked for or not.
func TestBootWatchLook(t *testing.T) {
	const (
		phase  = `{"msg":"boot phase","phase":"services"}` + "\n"
		ready  = `{"msg":"node ready"}` + "\n"
		failed = `{"msg":"boot failed","phase":"services","error":"apid did not start"}` + "\n"
	)

	c := &Cluster{Name: "c", Dir: t.TempDir(), Nodes: []Node{
		{Name: "c-controlplane-1", Type: certs.NodeControlPlane},
		{Name: "c-controlplane-2", Type: certs.NodeControlPlane},
		{Name: "c-worker-1", Type: certs.NodeWorker},
	}}

	write := func(n Node, log string) {
		t.Helper()

		if err := os.MkdirAll(c.nodeDir(n), 0o700); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(c.LogPath(n), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Each node's machined is a process that names the node's state
	// folder, as running looks for.
	for i, n := range c.Nodes {
		cmd := exec.CommandContext(t.Context(), "sh", "-c", "sleep 60; :", c.StatePath(n))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // ending the test's own process

		c.Nodes[i].PID = cmd.Process.Pid
	}

	write(c.Nodes[0], phase+ready)
	write(c.Nodes[1], phase)
	write(c.Nodes[2], phase)

	var progress strings.Builder

	w := &bootWatch{c: c, start: time.Now(), progress: &progress, shown: map[string]string{}}

	if pending, err := w.look(c.Nodes[:1]); err != nil || len(pending) != 0 {
		t.Fatalf("first control plane ready: pending %q, %v; want none", pending, err)
	}

	if pending, err := w.look(c.Nodes); err != nil || !slices.Equal(pending, []string{"c-controlplane-2", "c-worker-1"}) {
		t.Fatalf("every node: pending %q, %v; want the two still booting", pending, err)
	}

	if got := strings.Count(progress.String(), "\n"); got != 3 {
		t.Fatalf("%d progress lines, want one per node:\n%s", got, progress.String())
	}

	write(c.Nodes[2], phase+failed)

	if _, err := w.look(c.Nodes[:1]); err == nil || !strings.Contains(err.Error(), "c-worker-1 failed to boot: phase services: apid did not start") {
		t.Fatalf("a worker's failed boot while waiting for the first control plane: %v", err)
	}
}
