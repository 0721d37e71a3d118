package localcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrashLooping reads machined logs: a service that exits three times
// in a row is named with its last state and log lines; a service that
// came up in between starts counting again; a boot before offset is not
// this one's.
func TestCrashLooping(t *testing.T) {
	const (
		exit    = `{"msg":"service state","service":"apid","state":"Waiting","message":"exit status 1; restarting in 1s"}` + "\n"
		healthy = `{"msg":"service health","service":"apid","healthy":true,"message":""}` + "\n"
		running = `{"msg":"service state","service":"trustd","state":"Running","message":"started"}` + "\n"
	)

	for _, tt := range []struct {
		name, log string
		offset    int
		want      bool
	}{
		{name: "three exits", log: running + exit + exit + running + exit, want: true},
		{name: "two exits", log: exit + exit + running},
		{name: "healthy in between", log: exit + exit + healthy + exit},
		{name: "exits of an earlier boot", log: exit + exit + exit, offset: 3 * len(exit)},
		{name: "not JSON", log: "exit status 1; restarting in 1s\n" + exit + exit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cluster{Dir: t.TempDir()}
			n := Node{Name: "c-controlplane-1"}

			for path, data := range map[string]string{
				c.LogPath(n): tt.log,
				filepath.Join(c.StatePath(n), "logs", "apid.log"): "apid: cannot run here\n",
			} {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}

				if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}

			err := c.crashLooping(n, int64(tt.offset))
			if (err != nil) != tt.want {
				t.Fatalf("crashLooping = %v, want a crash loop: %v", err, tt.want)
			}

			if err == nil {
				return
			}

			for _, w := range []string{"node c-controlplane-1", "service apid exited 3 times", "exit status 1; restarting in 1s", "apid: cannot run here"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestWatchCrashLoopsEndsTheWait: a wait that would last is cut short by
// the crash loop, whose error it returns; a wait that ends by itself
// returns its own.
func TestWatchCrashLoopsEndsTheWait(t *testing.T) {
	c := &Cluster{Dir: t.TempDir()}
	n := Node{Name: "c-worker-1"}

	exit := `{"msg":"service state","service":"trustd","state":"Waiting","message":"exit status 2; restarting in 2s"}` + "\n"
	if err := os.MkdirAll(filepath.Dir(c.LogPath(n)), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(c.LogPath(n), []byte(strings.Repeat(exit, 3)), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	err := c.watchCrashLoops(ctx, []Node{n}, []int64{0}, func(ctx context.Context) error {
		<-ctx.Done()

		return ctx.Err()
	})

	var crash *crashLoopError
	if !errors.As(err, &crash) || crash.node != n.Name || crash.service != "trustd" {
		t.Fatalf("err = %v, want trustd's crash loop on %s", err, n.Name)
	}

	own := errors.New("node exited")
	if err := c.watchCrashLoops(ctx, []Node{n}, []int64{int64(3 * len(exit))}, func(context.Context) error { return own }); err != own {
		t.Fatalf("err = %v, want the wait's own", err)
	}
}
