package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// tree is a directory's regular files by relative path, with their mode
// and a digest of their content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()

	out := map[string]string{}

	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}

		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}

		info, err := d.Info()
		if err != nil {
			return err
		}

		rel, _ := filepath.Rel(dir, path)
		out[rel] = fmt.Sprintf("%v %x", info.Mode(), sha256.Sum256(data))

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	return out
}

// runRefused runs a command that must refuse to start: it must exit with
// an error, within waitTimeout, and its output is returned.
func runRefused(t *testing.T, name string, args ...string) string {
	t.Helper()

	var out bytes.Buffer

	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &out

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)

	go func() { done <- cmd.Wait() }()

	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s started (exit: %v):\n%s", name, err, out.String())
		}
	case <-time.After(waitTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not refuse to start:\n%s", name, out.String())
	}

	return out.String()
}

// damaged returns variants of a token store file, each cut or broken.
func damaged(t *testing.T, good []byte) map[string][]byte {
	t.Helper()

	rec := bytes.Index(good, []byte(`{"v":1`))
	if rec < 0 {
		t.Fatal("no record found in the token store")
	}

	broken := bytes.Clone(good)
	page := rec - rec%os.Getpagesize()

	for i := page + 8; i < page+64; i++ {
		broken[i] ^= 0xff
	}

	return map[string][]byte{
		"empty":                  nil,
		"truncated to 100 bytes": good[:100],
		"truncated to half":      good[:len(good)/2],
		"a record page broken":   broken,
	}
}

// TestDamagedTokenStoreIsRefused: trustd refuses a truncated or broken
// token store with an error naming it, writes nothing in its state
// directory, and once the file is restored every token is still there.
func TestDamagedTokenStoreIsRefused(t *testing.T) {
	needBinaries(t)

	n := newNode(t, "127.8.5.2")
	ctx := testContext(t)
	proc := n.start(t)
	n.waitHealth(t, "127.8.5.9", healthpb.HealthCheckResponse_SERVING)

	var ids []string

	for range 5 {
		tok := createToken(ctx, t, n.tokens(t), &tokens.CreateRequest{Description: "kept"})
		ids = append(ids, tok[:6])
	}

	if err := proc.stop(); err != nil {
		t.Fatal(err)
	}

	db := filepath.Join(n.state, "trustd", "tokens.db")

	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	for name, data := range damaged(t, good) {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(db, data, 0o600); err != nil {
				t.Fatal(err)
			}

			before := tree(t, n.state)
			out := runRefused(t, "trustd", "--config", n.config, "--state", n.state, "--listen", n.listen)

			if !strings.Contains(out, "token store is corrupt") || !strings.Contains(out, db) {
				t.Fatalf("the refusal does not name the damaged store:\n%s", out)
			}

			if after := tree(t, n.state); !maps(before, after) {
				t.Fatalf("the state directory changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}

	if err = os.WriteFile(db, good, 0o600); err != nil {
		t.Fatal(err)
	}

	n.start(t)
	n.waitHealth(t, "127.8.5.10", healthpb.HealthCheckResponse_SERVING)

	list, err := n.tokens(t).List(ctx, &tokens.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var listed []string
	for _, tok := range list.GetMessages()[0].GetTokens() {
		listed = append(listed, tok.GetId())
	}

	for _, id := range ids {
		if !slices.Contains(listed, id) {
			t.Fatalf("token %s lost; listed %v", id, listed)
		}
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}

	for k, v := range a {
		if b[k] != v {
			return false
		}
	}

	return true
}

// TestMachinedRefusesDamagedConfig: a truncated or broken machine config is
// refused before anything is written: machined exits naming the file and
// its problems, creates no state directory, and leaves the file as it was.
func TestMachinedRefusesDamagedConfig(t *testing.T) {
	needBinaries(t)

	good := writeNodeConfig(t, "127.8.5.3")

	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}

	for name, content := range map[string][]byte{
		"empty":             nil,
		"truncated to half": data[:len(data)/2],
		"a byte of garbage": append(bytes.Clone(data[:len(data)/3]), append([]byte{0xff}, data[len(data)/3+1:]...)...),
		"not YAML":          []byte("\x00\x01{{{"),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			config, state := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "state")

			if err := os.WriteFile(config, content, 0o600); err != nil {
				t.Fatal(err)
			}

			out := runRefused(t, "machined", "--config", config, "--state", state, "--bin-dir", binDir)
			if !strings.Contains(out, config) {
				t.Fatalf("the refusal does not name the config:\n%s", out)
			}

			if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("machined created its state directory for a refused config: %v", err)
			}

			if after, _ := os.ReadFile(config); !bytes.Equal(after, content) {
				t.Fatal("the refused config was changed")
			}
		})
	}
}

// writeNodeConfig writes a control-plane config with a trusted host clock,
// listening on ip, and returns its path.
func writeNodeConfig(t *testing.T, ip string) string {
	t.Helper()

	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.GenerateMachineConfig(b, certs.NodeControlPlane, certs.ConfigOptions{
		ClusterName: "e2e", Endpoint: ip, TrustHostClock: true, Hostname: "cp-1", ListenAddress: ip,
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "controlplane.yaml")
	if err = cfg.Save(path, false); err != nil {
		t.Fatal(err)
	}

	return path
}

// TestNodeWithDamagedTokenStore: a node whose state holds a broken token
// store keeps its file as it is; its trustd refuses to start, saying why,
// and machined keeps retrying it.
func TestNodeWithDamagedTokenStore(t *testing.T) {
	needBinaries(t)

	state := testutil.ShortTempDir(t)
	db := filepath.Join(state, "trustd", "tokens.db")
	junk := bytes.Repeat([]byte("not a token store "), 1000)

	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(db, junk, 0o600); err != nil {
		t.Fatal(err)
	}

	var out logtest.Sink

	cmd := exec.Command(filepath.Join(binDir, "machined"), "--config", writeNodeConfig(t, "127.8.5.4"), "--state", state, "--bin-dir", binDir)
	cmd.Stdout, cmd.Stderr = &out, &out

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { stopMachined(t, cmd, &out) })

	trustdLog := filepath.Join(state, "logs", "trustd.log")

	waitFor(t, "trustd refusing the store twice", func() error {
		data, _ := os.ReadFile(trustdLog)
		if n := strings.Count(string(data), "token store is corrupt"); n < 2 {
			return fmt.Errorf("%d refusals in trustd's log", n)
		}

		return nil
	})

	if after, _ := os.ReadFile(db); !bytes.Equal(after, junk) {
		t.Fatal("the damaged token store was changed")
	}
}

// stopMachined stops a machined started by a test, and kills it and its
// services if it does not stop in time.
func stopMachined(t *testing.T, cmd *exec.Cmd, out *logtest.Sink) {
	t.Helper()

	done := make(chan error, 1)

	go func() { done <- cmd.Wait() }()

	_ = cmd.Process.Signal(syscall.SIGTERM)

	select {
	case <-done:
	case <-time.After(waitTimeout):
		for _, pid := range append(localcluster.Descendants(cmd.Process.Pid), cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}

		<-done
		t.Errorf("machined did not stop:\n%s", out.String())
	}

	if t.Failed() {
		t.Logf("machined:\n%s", out.String())
	}
}
