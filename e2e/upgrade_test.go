package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// upgradeOldTag stamps the build a node is upgraded from: the minor before
// the test build's (version.Dev).
const upgradeOldTag = "v0.0.9"

// upgradeTrial is the nodes' --upgrade-trial: a node of one control plane
// is healthy in a few seconds; a broken version waits this long for its
// rollback.
const upgradeTrial = 20 * time.Second

// TestUpgrade upgrades a control plane built as upgradeOldTag to this
// build over the API, as an operator would with the Talos client: a
// damaged bundle refused before anything changes, the upgrade, a rollback
// on demand, a staged upgrade that a restart of the installed machined
// boots, and a bundle whose apid cannot start, rolled back by the node
// itself.
func TestUpgrade(t *testing.T) {
	needImages(t)
	t.Parallel()

	old := oldBuild(t)
	c := upgradeCluster(t, localcluster.Options{
		Name: "upgrade", ControlPlanes: 1, CIDR: netip.MustParsePrefix("127.9.61.0/24"), BinDir: old, UpgradeTrial: upgradeTrial,
	})
	cp := c.ControlPlanes()[0]
	admin := talosClient(t, c.ClientConfigPath())
	bundles := clusterAdmin(t, c).conn(t, cp.Address)
	store := upgrade.Store{Dir: layout.Layout{State: c.StatePath(cp)}.UpgradeDir()}

	waitVersion(t, admin, cp.Address, upgradeOldTag)

	reader := roleClient(t, admin, cp.Address, "os:reader")

	t.Run("a damaged bundle is refused before anything changes", func(t *testing.T) {
		path := writeBundle(t, binDir, version.Dev)
		damage(t, path)

		_, err := admin.UpgradeWithOptions(client.WithNode(etcdCtx(t), cp.Address), client.WithUpgradeImage(uploadBundle(t, bundles, path)))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "digest differs from the manifest") {
			t.Fatalf("Upgrade with a damaged bundle: %v, want InvalidArgument naming the digest", err)
		}

		if _, ok, err := store.Load(); ok || err != nil {
			t.Fatalf("the refused upgrade recorded slots (%v, %v)", ok, err)
		}

		waitVersion(t, admin, cp.Address, upgradeOldTag)
	})

	t.Run("upgraded over the API", func(t *testing.T) {
		ref := uploadBundle(t, bundles, writeBundle(t, binDir, version.Dev))
		start := time.Now()

		if _, err := admin.UpgradeWithOptions(client.WithNode(etcdCtx(t), cp.Address), client.WithUpgradeImage(ref)); err != nil {
			t.Fatal(err)
		}

		waitVersion(t, admin, cp.Address, version.Dev)
		t.Logf("upgrade: node on %s and all services up %s after the call", version.Dev, time.Since(start).Round(time.Millisecond))

		eventually(t, "the new version confirmed", func() error {
			s, _, err := store.Load()
			if err == nil && (s.Trial != nil || s.Active.Version != version.Dev || s.Previous == nil) {
				err = fmt.Errorf("slots %+v", s)
			}

			return err
		})
	})

	t.Run("rolled back on demand", func(t *testing.T) {
		if err := admin.Rollback(client.WithNode(etcdCtx(t), cp.Address)); err != nil {
			t.Fatal(err)
		}

		waitVersion(t, admin, cp.Address, upgradeOldTag)

		st := upgradeStatus(t, reader, cp.Address)
		if r := st.LastRollback; st.ActiveVersion != upgradeOldTag || st.PreviousVersion != version.Dev || r.ByNode ||
			r.From != version.Dev || r.To != upgradeOldTag || r.Reason != "rollback asked through the API" {
			t.Fatalf("upgrade status after the rollback: %+v", st)
		}
	})

	t.Run("staged, then booted by a restart from the installed machined", func(t *testing.T) {
		ref := uploadBundle(t, bundles, writeBundle(t, binDir, version.Dev))

		if _, err := admin.UpgradeWithOptions(client.WithNode(etcdCtx(t), cp.Address), client.WithUpgradeImage(ref),
			client.WithUpgradeStage(true)); err != nil {
			t.Fatal(err)
		}

		waitVersion(t, admin, cp.Address, upgradeOldTag)

		// What a supervisor does: stop machined, start it again from
		// where it was installed (old's machined, old's --bin-dir).
		if err := c.StopNode(cp.Name); err != nil {
			t.Fatal(err)
		}

		if _, err := c.StartNode(etcdCtx(t), cp.Name, etcdTimeout); err != nil {
			t.Fatal(err)
		}

		waitVersion(t, admin, cp.Address, version.Dev)
	})

	t.Run("a version whose apid cannot start rolls back by itself, and aegisctl upgrade stops there", func(t *testing.T) {
		checkWentBack(t, c, reader, cp)

		s, _, err := store.Load()
		if err != nil || s.Active.Version != version.Dev || s.LastRollback == nil || !strings.Contains(s.LastRollback.Reason, crashLoop) {
			t.Fatalf("slots %+v (%v)", s, err)
		}

		if tail := c.Tail(cp, 400); !strings.Contains(tail, `"msg":"upgrade rolled back"`) {
			t.Fatalf("no log line of the rollback:\n%s", tail)
		}
	})
}

// upgradeCluster creates the local cluster opts describe, in a folder of
// the test's, destroyed when the test ends (the nodes' last log lines
// shown when it failed).
func upgradeCluster(t *testing.T, opts localcluster.Options) *localcluster.Cluster {
	t.Helper()

	opts.StateDir, opts.Timeout = testutil.ShortTempDir(t), etcdTimeout

	c, err := localcluster.Create(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 60))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return c
}

// The build stamped upgradeOldTag, made once for the package's tests.
var (
	oldBuilding sync.Once
	oldDir      string
	oldErr      error
)

// oldBuild links the node's binaries again, stamped upgradeOldTag, once,
// into a folder under binDir (removed with it after the tests), and
// returns that folder.
func oldBuild(t *testing.T) string {
	t.Helper()
	needBinaries(t)

	oldBuilding.Do(func() {
		oldDir = filepath.Join(binDir, "stamped-"+upgradeOldTag)
		oldErr = buildStamped(oldDir, upgradeOldTag)
	})

	if oldErr != nil {
		t.Fatal(oldErr)
	}

	return oldDir
}

// buildStamped links the node's binaries again, stamped with tag, into dir.
func buildStamped(dir, tag string) error {
	errs := make([]error, 4)

	var wg sync.WaitGroup

	for i, name := range []string{"machined", "apid", "trustd", "etcd"} {
		wg.Go(func() {
			cmd := exec.Command("go", "build", "-ldflags", "-X github.com/aegis-os/aegis/internal/version.Tag="+tag,
				"-o", filepath.Join(dir, name), "../cmd/"+name)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")

			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("building %s: %w\n%s", name, err, out)
			}
		})
	}

	wg.Wait()

	return errors.Join(errs...)
}

// brokenBin is binDir with an apid that exits at once.
func brokenBin(t *testing.T) string {
	t.Helper()

	dir := t.TempDir()

	for _, p := range bundle.Contents() {
		src := filepath.Join(binDir, filepath.Base(p))
		if filepath.Dir(p) == bundle.ImageDir {
			src = filepath.Join(binDir, "images", filepath.Base(p))
		}

		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}

		if p == bundle.BinDir+"/apid" {
			data = []byte("#!/bin/sh\necho 'apid: broken on purpose' >&2\nexit 1\n")
		}

		dst := filepath.Join(dir, filepath.Base(p))
		if filepath.Dir(p) == bundle.ImageDir {
			dst = filepath.Join(dir, "images", filepath.Base(p))
		}

		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	return dir
}

// writeBundle writes the release bundle of bin (a `make build` tree)
// stamped v, uncompressed (a second instead of ten), and returns its path.
func writeBundle(t *testing.T, bin, v string) string {
	t.Helper()

	path := filepath.Join(t.TempDir(), "aegis.bundle")

	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if _, err := bundle.Write(f, bundle.Source{BinDir: bin, Version: v, Plain: true}); err != nil {
		t.Fatal(err)
	}

	return path
}

// damage flips one byte in the middle of the file at path.
func damage(t *testing.T, path string) {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	data[len(data)/2] ^= 0xff

	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// uploadBundle streams the bundle at path to the node conn reaches, as
// aegis.upgrade.BundleService/Upload, and returns its reference.
func uploadBundle(t *testing.T, conn *grpc.ClientConn, path string) string {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	sum := sha256.Sum256(data)

	stream, err := upgradeapi.NewBundleServiceClient(conn).Upload(etcdCtx(t))
	if err != nil {
		t.Fatal(err)
	}

	if err := stream.Send(&upgradeapi.UploadRequest{Header: &upgradeapi.UploadHeader{Size: int64(len(data)), Sha256: hex.EncodeToString(sum[:])}}); err != nil {
		t.Fatal(err)
	}

	r := bytes.NewReader(data)
	buf := make([]byte, 1<<20)

	for {
		n, err := r.Read(buf)
		if n > 0 {
			if err := stream.Send(&upgradeapi.UploadRequest{Chunk: buf[:n]}); err != nil {
				t.Fatal(err)
			}
		}

		if err == io.EOF {
			break
		}
	}

	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}

	return resp.GetMessages()[0].GetRef()
}

// waitVersion waits until node reports Aegis version v with every service
// up.
func waitVersion(t *testing.T, c *client.Client, node, v string) {
	t.Helper()

	eventually(t, "the node on "+v, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		resp, err := c.Version(client.WithNode(ctx, node))
		if err != nil {
			return err
		}

		got, _, _ := version.FromTalosTag(resp.GetMessages()[0].GetVersion().GetTag())
		if got != v {
			return fmt.Errorf("version %s", got)
		}

		list, err := c.ServiceList(client.WithNode(ctx, node))
		if err != nil {
			return err
		}

		if !allRunning(list) {
			return fmt.Errorf("services not all up: %v", serviceStates(list))
		}

		return nil
	})
}

func serviceStates(list *machine.ServiceListResponse) []string {
	var out []string
	for _, s := range list.GetMessages()[0].GetServices() {
		out = append(out, s.GetId()+"="+s.GetState())
	}

	return out
}
