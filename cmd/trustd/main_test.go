package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logtest"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{name: "minimal", args: []string{"--config", "c.yaml", "--state", "s"}, ok: true},
		{name: "all", args: []string{"--config", "c.yaml", "--state", "s", "--listen", "127.0.1.2:50001", "--cert", "a", "--key", "b"}, ok: true},
		{name: "no state", args: []string{"--config", "c.yaml"}},
		{name: "cert without key", args: []string{"--config", "c.yaml", "--state", "s", "--cert", "a"}},
		{name: "stray argument", args: []string{"--config", "c.yaml", "--state", "s", "extra"}},
		{name: "unknown flag", args: []string{"--config", "c.yaml", "--state", "s", "--tls"}},
		{name: "short lifetime", args: []string{"--config", "c.yaml", "--state", "s", "--cert-ttl", "2m"}, ok: true},
		{name: "lifetime under a minute", args: []string{"--config", "c.yaml", "--state", "s", "--cert-ttl", "30s"}},
		{name: "lifetime over a day", args: []string{"--config", "c.yaml", "--state", "s", "--cert-ttl", "25h"}},
		{name: "log level", args: []string{"--config", "c.yaml", "--state", "s", "--log-level", "warn"}, ok: true},
		{name: "bad log level", args: []string{"--config", "c.yaml", "--state", "s", "--log-level", "trace"}},
		{name: "log format text", args: []string{"--config", "c.yaml", "--state", "s", "--log-format", "text"}, ok: true},
		{name: "bad log format", args: []string{"--config", "c.yaml", "--state", "s", "--log-format", "xml"}},
		{name: "inherited socket", args: []string{"--config", "c.yaml", "--state", "s", "--listen", "127.0.1.2:50001", "--listen-fd", "3"}, ok: true},
		{name: "inherited socket without its address", args: []string{"--config", "c.yaml", "--state", "s", "--listen-fd", "3"}},
		{name: "negative descriptor", args: []string{"--config", "c.yaml", "--state", "s", "--listen", "127.0.1.2:50001", "--listen-fd", "-1"}},
		{name: "version alone", args: []string{"--version"}, ok: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseFlags(tt.args, io.Discard); (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestVersionAndBadLogLevel(t *testing.T) {
	var stdout strings.Builder

	if err := run(context.Background(), []string{"--version"}, &stdout, io.Discard); err != nil || !strings.HasPrefix(stdout.String(), "trustd v") {
		t.Fatalf("--version: %v %q", err, stdout.String())
	}

	err := run(context.Background(), []string{"--config", "c.yaml", "--state", "s", "--log-level", "trace"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unknown log level "trace": use debug, info, warn or error`) {
		t.Fatalf("bad level: %v", err)
	}
}

// writeConfigs writes a control-plane and a worker config of one new cluster.
func writeConfigs(t *testing.T, dir string, opts certs.ConfigOptions) (cp, worker string) {
	t.Helper()

	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for typ, path := range map[certs.NodeType]*string{certs.NodeControlPlane: &cp, certs.NodeWorker: &worker} {
		c, err := certs.GenerateMachineConfig(b, typ, opts, time.Now())
		if err != nil {
			t.Fatal(err)
		}

		*path = filepath.Join(dir, string(typ)+".yaml")
		if err = c.Save(*path, false); err != nil {
			t.Fatal(err)
		}
	}

	return cp, worker
}

func TestRefusesWorkerConfig(t *testing.T) {
	dir := t.TempDir()
	_, worker := writeConfigs(t, dir, certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.0.1.2", TrustHostClock: true})

	err := run(context.Background(), []string{"--config", worker, "--state", dir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "control planes only") {
		t.Fatalf("err = %v", err)
	}
}

// TestStateLayout runs the daemon in-process with a trusted host clock and
// checks where its state goes and with which modes, and that it stops on
// cancel.
func TestStateLayout(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cp, _ := writeConfigs(t, dir, certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.0.1.2", TrustHostClock: true, Hostname: "cp-1"})

	ctx, cancel := context.WithCancel(context.Background())
	logs := &logtest.Sink{}
	done := make(chan error, 1)

	go func() {
		done <- run(ctx, []string{"--config", cp, "--state", state, "--listen", "127.0.1.2:0"}, io.Discard, logs)
	}()

	deadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(logs.JSONRecords(), func(m map[string]any) bool { return m["msg"] == "trustd serving" }) {
		if time.Now().After(deadline) {
			t.Fatalf("trustd did not start; logs:\n%v", logs.JSONRecords())
		}

		time.Sleep(10 * time.Millisecond)
	}

	for _, want := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(state, "trustd"), os.ModeDir | 0o700},
		{filepath.Join(state, "trustd", "tokens.db"), 0o600},
		{filepath.Join(state, "run", "trustd"), os.ModeDir | 0o700},
		{filepath.Join(state, "run", "trustd", "tokens.sock"), os.ModeSocket | 0o600},
	} {
		st, err := os.Stat(want.path)
		if err != nil {
			t.Fatal(err)
		}

		if got := st.Mode() & (os.ModeType | os.ModePerm); got != want.mode {
			t.Errorf("%s: mode %v, want %v", want.path, got, want.mode)
		}
	}

	cancel()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("trustd did not stop")
	}
}

func TestServerHosts(t *testing.T) {
	cfg := &certs.MachineConfig{Machine: certs.MachineSpec{Hostname: "cp-1", CertSANs: []string{"cp.example", "127.0.0.1"}}}

	tests := []struct {
		listen string
		want   []string
	}{
		{listen: "127.0.1.2:50001", want: []string{"127.0.1.2", "127.0.0.1", "cp-1", "cp.example"}},
		{listen: ":50001", want: []string{"127.0.0.1", "cp-1", "cp.example"}},
		{listen: "0.0.0.0:50001", want: []string{"127.0.0.1", "cp-1", "cp.example"}},
	}

	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			if got := serverHosts(cfg, tt.listen); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %v, want %v", got, tt.want)
			}
		})
	}
}
