package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// Addresses of TestNTPDownAtBoot.
const (
	ntpBootChrony = "127.8.12.1"
	ntpBootCP     = "127.8.12.2"
	ntpBootWorker = "127.8.12.3"
	ntpBootFresh  = "127.8.12.4"
)

// TestNTPDownAtBoot: a control plane and a worker synced with a real
// chronyd; chronyd stops. The worker's machined is restarted and the
// control plane rebooted through the API: both serve their API at once
// with the certificates they hold (Version, ServiceList showing the
// certificates service waiting for time sync, Logs, Events with the unmet
// time condition), and the control plane's trustd answers
// FailedPrecondition rather than refusing connections. A fresh worker
// with no certificates says in its log what it waits for. chronyd comes
// back: all three finish their boot without a restart.
func TestNTPDownAtBoot(t *testing.T) {
	needBinaries(t)
	t.Parallel()

	port := freePort(t, "udp", ntpBootChrony)
	ntpd := runChrony(t, ntpBootChrony, port, "")
	dir := testutil.ShortTempDir(t)
	cpCfg, workerCfg := ntpConfigs(t, dir, ntpd.addr)

	cp := startMachined(t, cpCfg, filepath.Join(dir, "cp"))
	cp.waitReady(t)

	worker := startMachined(t, workerCfg, filepath.Join(dir, "worker"))
	worker.waitReady(t)

	ntpd.stop()

	worker.stop()
	worker = startMachined(t, workerCfg, filepath.Join(dir, "worker"))

	cpc := directClient(t, dir, ntpBootCP)
	if _, err := cpc.MachineClient.Reboot(ctx(t), &machine.RebootRequest{}); err != nil {
		t.Fatal(err)
	}

	for _, node := range []string{ntpBootWorker, ntpBootCP} {
		t.Run("API while NTP is down on "+node, func(t *testing.T) {
			apiWhileWaiting(t, directClient(t, dir, node), ntpd.addr, node == ntpBootCP)
		})
	}

	t.Run("trustd answers FailedPrecondition", func(t *testing.T) {
		trustdRefusesUnsynced(t, cpCfg)
	})

	t.Run("no client certificate from an unsynced clock", func(t *testing.T) {
		_, err := cpc.GenerateClientConfiguration(ctx(t), &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("GenerateClientConfiguration: %v", err)
		}
	})

	fresh := startMachined(t, nodeConfigAt(t, dir, workerCfg, "fresh", ntpBootFresh), filepath.Join(dir, "fresh"))

	waitUntil(t, "the fresh node says what it waits for", func() bool {
		return fresh.logged("waiting for time sync", `"before":"issuing node certificates"`, ntpd.addr)
	})

	if !refusesConnections(ntpBootFresh) {
		t.Fatal("a node without certificates serves its API")
	}

	runChrony(t, ntpBootChrony, port, "")

	for _, p := range []*machinedProc{worker, fresh} {
		p.waitReadyWithin(t, faultTimeout)
	}

	waitFor(t, "the control plane's services up after its reboot", func() error {
		return allUp(cpc)
	})
}

// ntpConfigs generates a control plane's and a worker's config whose NTP
// server is ntp, placed on their addresses.
func ntpConfigs(t *testing.T, dir, ntp string) (cp, worker string) {
	t.Helper()

	out, err := exec.Command(filepath.Join(binDir, "aegisctl"), "gen", "config", "ntp", ntpBootCP, "--time-server", ntp, "-o", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("aegisctl gen config: %v\n%s", err, out)
	}

	cp = nodeConfigAt(t, dir, filepath.Join(dir, "controlplane.yaml"), "cp", ntpBootCP)
	worker = nodeConfigAt(t, dir, filepath.Join(dir, "worker.yaml"), "worker", ntpBootWorker)

	return cp, worker
}

// nodeConfigAt writes a copy of the config at from for a node named name
// on addr, and returns its path.
func nodeConfigAt(t *testing.T, dir, from, name, addr string) string {
	t.Helper()

	cfg, err := certs.LoadMachineConfig(from, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	cfg.Machine.Hostname, cfg.Machine.ListenAddress = name, addr
	path := filepath.Join(dir, name+".yaml")

	if err = cfg.Save(path, true); err != nil {
		t.Fatal(err)
	}

	return path
}

// directClient is a Talos client of node's own apid, as admin.
func directClient(t *testing.T, dir, node string) *client.Client {
	t.Helper()

	cfg, err := clientconfig.Open(filepath.Join(dir, "aegisconfig"))
	if err != nil {
		t.Fatal(err)
	}

	cfg.Contexts[cfg.Context].Endpoints = []string{node}

	c, err := client.New(context.Background(), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() })

	return c
}

// apiWhileWaiting checks what a node waiting for time sync answers; a
// control plane's etcd waits too, for its certificates.
func apiWhileWaiting(t *testing.T, c *client.Client, ntp string, controlPlane bool) {
	waitFor(t, "Version", func() error {
		_, err := c.Version(ctx(t))

		return err
	})

	want := "waiting for time sync with NTP servers " + ntp

	waitFor(t, "ServiceList showing the wait", func() error {
		list, err := c.ServiceList(ctx(t))
		if err != nil {
			return err
		}

		var got []string

		for _, s := range list.GetMessages()[0].GetServices() {
			msg := ""
			if evs := s.GetEvents().GetEvents(); len(evs) > 0 {
				msg = evs[len(evs)-1].GetMsg()
			}

			got = append(got, fmt.Sprintf("%s=%s (%s)", s.GetId(), s.GetState(), msg))
		}

		all := strings.Join(got, "; ")
		if !strings.Contains(all, "certificates=Waiting ("+want+")") ||
			controlPlane && !strings.Contains(all, "etcd=Waiting ("+want+" and etcd certificates)") {
			return fmt.Errorf("services: %v", got)
		}

		return nil
	})

	// The first boot may have waited a moment for its first NTP reply too,
	// but then to issue, not to renew.
	if logs := readLogs(t, c, "machined"); !strings.Contains(logs, `"msg":"waiting for time sync","servers":["`+ntp+`"],"before":"renewing node certificates"`) {
		t.Fatalf("machined's log says nothing of the wait:\n%s", logs)
	}

	if !unmetTimeEvent(t, c, want) {
		t.Fatal("no machine status event with the unmet time condition")
	}
}

func readLogs(t *testing.T, c *client.Client, id string) string {
	t.Helper()

	stream, err := c.Logs(ctx(t), "system", common.ContainerDriver_CONTAINERD, id, false, -1)
	if err != nil {
		t.Fatal(err)
	}

	var all strings.Builder

	for {
		d, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return all.String()
		}

		if err != nil {
			t.Fatal(err)
		}

		all.Write(d.GetBytes())
	}
}

// unmetTimeEvent looks in the node's events for a machine status that
// waits for time sync.
func unmetTimeEvent(t *testing.T, c *client.Client, reason string) bool {
	t.Helper()

	evCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	stream, err := c.MachineClient.Events(evCtx, &machine.EventsRequest{TailEvents: -1})
	if err != nil {
		t.Fatal(err)
	}

	for {
		ev, err := stream.Recv()
		if err != nil {
			return false
		}

		decoded, err := client.UnmarshalEvent(ev)
		if err != nil {
			continue
		}

		st, ok := decoded.Payload.(*machine.MachineStatusEvent)
		if !ok {
			continue
		}

		for _, u := range st.GetStatus().GetUnmetConditions() {
			if u.GetName() == "time" && u.GetReason() == reason {
				return true
			}
		}
	}
}

// trustdRefusesUnsynced calls the control plane's trustd with the worker
// token: it must answer, with FailedPrecondition.
func trustdRefusesUnsynced(t *testing.T, cpCfg string) {
	cfg, err := certs.LoadMachineConfig(cpCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	creds := credentials.NewTLS(&tls.Config{RootCAs: cfg.AcceptedCAs().Pool(), ServerName: ntpBootCP, MinVersion: tls.VersionTLS13})

	conn, err := grpc.NewClient(net.JoinHostPort(ntpBootCP, strconv.Itoa(wire.TrustdPort)), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	csr := trustdtest.CSR(t, ca.Ed25519, "worker-9", "worker-9")

	waitFor(t, "trustd answering", func() error {
		_, err := trustdtest.Call(ctx(t), securityapi.NewSecurityServiceClient(conn), cfg.TrustdToken().Reveal(), csr)
		if status.Code(err) == codes.FailedPrecondition {
			return nil
		}

		return fmt.Errorf("want FailedPrecondition, got %v", err)
	})
}

// allUp requires every service of the client's node to run and be
// healthy, etcd aside: it waits for a bootstrap, as the boot does not.
func allUp(c *client.Client) error {
	callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	list, err := c.ServiceList(callCtx)
	if err != nil {
		return err
	}

	for _, s := range list.GetMessages()[0].GetServices() {
		if s.GetId() != "etcd" && (s.GetState() != "Running" || !s.GetHealth().GetHealthy()) {
			return fmt.Errorf("%s is %s (healthy %v)", s.GetId(), s.GetState(), s.GetHealth().GetHealthy())
		}
	}

	return nil
}

// waitReadyWithin waits for a "node ready" record of this machined.
func (p *machinedProc) waitReadyWithin(t *testing.T, d time.Duration) {
	t.Helper()

	deadline := time.Now().Add(d)

	for !strings.Contains(p.out.String(), `"msg":"node ready"`) {
		if time.Now().After(deadline) {
			t.Fatalf("node not ready after %s:\n%s", d, p.out.String())
		}

		time.Sleep(250 * time.Millisecond)
	}
}
