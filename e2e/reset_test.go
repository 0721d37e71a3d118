package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// TestReset runs a control plane and two workers with a short heartbeat
// and resets them with the Talos client through the control plane's apid:
// a reader is refused; the only control plane refuses a graceful reset,
// saying why; a worker reset with reboot joins again with its token under
// new certificates and is a member again; a worker reset without reboot
// ends machined with status 0, leaves the member list, and keeps nothing
// in its state directory while its config is untouched.
func TestReset(t *testing.T) {
	needBinaries(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "rst", ControlPlanes: 1, Workers: 2, CIDR: netip.MustParsePrefix("127.9.41.0/24"),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: etcdTimeout, HeartbeatInterval: membersHeartbeat,
		Runtime: certs.RuntimeProcess,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 40))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	admin := talosClient(t, c.ClientConfigPath())
	cp := c.ControlPlanes()[0]
	workers := slices.DeleteFunc(slices.Clone(c.Nodes), func(n localcluster.Node) bool { return n.Type.IsControlPlane() })

	eventually(t, "3 members", func() error { return membersAre(etcdCtx(t), admin, c.Nodes) })

	t.Run("reader refused", func(t *testing.T) {
		reader := roleClient(t, admin, cp.Address, "os:reader")

		_, err := reader.MachineClient.Reset(client.WithNode(etcdCtx(t), workers[0].Address), &machine.ResetRequest{Graceful: true})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Reset as os:reader: %v, want PermissionDenied", err)
		}
	})

	t.Run("only control plane refuses a graceful reset", func(t *testing.T) {
		_, err := admin.MachineClient.Reset(client.WithNode(etcdCtx(t), cp.Address), &machine.ResetRequest{Graceful: true})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "only voting member") {
			t.Fatalf("graceful Reset of the only control plane: %v, want FailedPrecondition naming the only voter", err)
		}

		out, err := aegisctl(t, c.Dir, "-n", cp.Address, "reset")
		if err == nil || !strings.Contains(out, "only voting member") || !strings.Contains(out, "graceful=false") {
			t.Fatalf("aegisctl reset of the only control plane: %v\n%s", err, out)
		}

		t.Logf("aegisctl -n %s reset:\n%s", cp.Address, out)

		// Nothing changed: every node stays a member (eventually, as a
		// busy machine may delay a heartbeat past its age-out).
		eventually(t, "3 members after the refusal", func() error { return membersAre(etcdCtx(t), admin, c.Nodes) })
	})

	t.Run("worker reset with reboot joins again", func(t *testing.T) {
		w := workers[0]
		before := serverSerial(t, c, w)

		resp, err := admin.MachineClient.Reset(client.WithNode(etcdCtx(t), w.Address), &machine.ResetRequest{Graceful: true, Reboot: true})
		if err != nil || resp.GetMessages()[0].GetActorId() == "" {
			t.Fatalf("Reset with reboot: %v, %v", err, resp)
		}

		eventually(t, w.Name+" back with a new certificate", func() error {
			after, err := readServerSerial(c, w)
			switch {
			case err != nil:
				return err
			case after.Cmp(before) == 0:
				return errors.New("same serial as before the reset")
			}

			return membersAre(etcdCtx(t), admin, c.Nodes)
		})

		if _, err := admin.Version(client.WithNode(etcdCtx(t), w.Address)); err != nil {
			t.Fatalf("Version of %s after the reset: %v", w.Name, err)
		}

		t.Logf("%s: server certificate serial %x before the reset, %x after", w.Name, before, serverSerial(t, c, w))
	})

	t.Run("worker reset without reboot", func(t *testing.T) {
		w := workers[1]
		config, err := os.ReadFile(c.ConfigPath(w))
		if err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		actor := resetFollowingEvents(t, admin, w)

		eventually(t, w.Name+"'s machined ended", func() error {
			log, err := os.ReadFile(c.LogPath(w))
			if err != nil || !bytes.Contains(log, []byte("ended: exit status 0")) {
				return fmt.Errorf("machined still running: %v", err)
			}

			return nil
		})

		eventually(t, w.Name+" out of the members", func() error {
			return membersAre(etcdCtx(t), admin, slices.DeleteFunc(slices.Clone(c.Nodes), func(n localcluster.Node) bool { return n.Name == w.Name }))
		})

		gone := time.Since(start)

		// Removed through trustd, not aged out.
		if log, _ := os.ReadFile(c.LogPath(w)); bytes.Contains(log, []byte("removing the member entry failed")) {
			t.Fatalf("%s did not remove its member entry:\n%s", w.Name, log)
		}

		// Its name left with it: the node that replaces it, at another
		// address, obtains it at once.
		const replacement = "127.9.41.200" // in the cluster's range, no node's
		if err := requestName(t, loadConfig(t, c.ConfigPath(w)), c.ControlPlanes()[0], replacement, w.Name); err != nil {
			t.Fatalf("%s's name from %s after it left: %v, want it free", w.Name, replacement, err)
		}

		left, err := os.ReadDir(c.StatePath(w))
		if err != nil || len(left) != 0 {
			t.Fatalf("state directory after the reset: %v, %v", left, err)
		}

		if kept, err := os.ReadFile(c.ConfigPath(w)); err != nil || !bytes.Equal(kept, config) {
			t.Fatalf("machine config after the reset: changed or gone (%v)", err)
		}

		t.Logf("%s reset by actor %s: out of the members %s after the call (age-out %s), machined ended with status 0, state directory empty, config kept",
			w.Name, actor, gone.Round(10*time.Millisecond), 3*membersHeartbeat)
	})
}

// resetFollowingEvents resets w without reboot while following its events,
// and returns the actor once the RESETTING stage of that actor was seen.
func resetFollowingEvents(t *testing.T, admin *client.Client, w localcluster.Node) string {
	t.Helper()

	ctx, cancel := context.WithCancel(client.WithNode(etcdCtx(t), w.Address))
	defer cancel()

	stream, err := admin.MachineClient.Events(ctx, &machine.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if _, err = stream.Recv(); err != nil { // the watch is set up
		t.Fatal(err)
	}

	resp, err := admin.MachineClient.Reset(client.WithNode(etcdCtx(t), w.Address), &machine.ResetRequest{Graceful: true})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}

	actor := resp.GetMessages()[0].GetActorId()

	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("events of %s before RESETTING of actor %s: %v", w.Name, actor, err)
		}

		decoded, err := client.UnmarshalEvent(ev)
		if err != nil {
			continue
		}

		if s, ok := decoded.Payload.(*machine.MachineStatusEvent); ok && s.GetStage() == machine.MachineStatusEvent_RESETTING &&
			decoded.ActorID == actor {
			return actor
		}
	}
}

// readServerSerial is the serial of the node's server certificate as its
// state directory holds it.
func readServerSerial(c *localcluster.Cluster, n localcluster.Node) (*big.Int, error) {
	path, _ := layout.Layout{State: c.StatePath(n)}.NodeCertificate("server")

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}

	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}

	return crt.SerialNumber, nil
}

func serverSerial(t *testing.T, c *localcluster.Cluster, n localcluster.Node) *big.Int {
	t.Helper()

	s, err := readServerSerial(c, n)
	if err != nil {
		t.Fatal(err)
	}

	return s
}

// TestResetControlPlane resets one of three control planes gracefully with
// reboot: it leaves etcd first, so the other two keep quorum, and joins
// again as a new member (another member ID) that is promoted to voter.
func TestResetControlPlane(t *testing.T) {
	c := etcdCluster(t, "rcp", "127.9.43.0/24", 3, 0, false)
	admin := talosClient(t, c.ClientConfigPath())
	cps := c.ControlPlanes()
	names := []string{cps[0].Name, cps[1].Name, cps[2].Name}

	eventually(t, "3 voters", func() error { return votersAre(etcdCtx(t), admin, cps[0].Address, names...) })

	before, err := members(etcdCtx(t), admin, cps[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := admin.MachineClient.Reset(client.WithNode(etcdCtx(t), cps[2].Address), &machine.ResetRequest{Graceful: true, Reboot: true}); err != nil {
		t.Fatalf("Reset of %s: %v", cps[2].Name, err)
	}

	// One listing for both checks: read apart, the member could be seen a
	// voter before it left and absent (no ID) after.
	eventually(t, cps[2].Name+" a voter again under a new member ID", func() error {
		after, err := members(etcdCtx(t), admin, cps[0].Address)
		if err != nil {
			return err
		}

		if err := checkVoters(after, names...); err != nil {
			return err
		}

		if after[cps[2].Name].GetId() == before[cps[2].Name].GetId() {
			return errors.New("same member ID: it never left")
		}

		return nil
	})

	if log, _ := os.ReadFile(c.LogPath(cps[2])); !bytes.Contains(log, []byte("reset: state directory wiped")) {
		t.Fatalf("%s was not wiped:\n%s", cps[2].Name, log)
	}

	after, _ := members(etcdCtx(t), admin, cps[0].Address)
	t.Logf("%s: etcd member %x before the reset, %x after, a voter again", cps[2].Name, before[cps[2].Name].GetId(), after[cps[2].Name].GetId())
}
