package localcluster

import (
	"os"
	"testing"

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
