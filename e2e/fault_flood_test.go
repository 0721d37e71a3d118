package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/e2e/flood"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
)

// Flood sizes: well over each server's caps (trustd held 512 slots and
// blocked Accept; apid had none), bounded for a shared machine.
const (
	floodIdle      = 600
	floodSilent    = 2000
	floodHalfHello = 500
)

// floodSource is the one source address every flood comes from; the
// legitimate callers use the default source, another address.
const floodSource = "127.8.14.2"

// floodWorker is the address the worker joining during a flood calls from
// and asks for, in the cluster's range.
const floodWorker = "127.8.13.250"

// TestConnectionFlood: one source holds its maximum of idle TLS connections
// (handshake done, HTTP/2 preface sent, no call) and floods connections
// that never send a ClientHello or stop halfway through one. Meanwhile a
// worker with a valid token joins through trustd and an admin calls apid.
// Then many sources, a few connections each, hold every slot of both.
func TestConnectionFlood(t *testing.T) {
	needBinaries(t)

	c := localCluster(t, "flood", "127.8.13.0/24", 0)
	cp := c.Nodes[0]
	a := clusterAdmin(t, c)

	t.Run("trustd", func(t *testing.T) {
		f := startFlood(t, flood.Config{
			Target: net.JoinHostPort(cp.Address, strconv.Itoa(wire.TrustdPort)),
			TLS:    &tls.Config{RootCAs: a.roots, ServerName: cp.Address, MinVersion: tls.VersionTLS13},
			Idle:   floodIdle, Silent: floodSilent,
		}, trustd.MaxConnectionsPerSource)

		worker, err := join.New(workerJoinConfig(t, c, cp))
		if err != nil {
			t.Fatal(err)
		}

		// Retrying as a worker does, for a generous minute.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		if _, err = worker.Join(ctx); err != nil {
			t.Fatalf("a worker could not join during the flood: %v (flood: %+v)", err, f.Counts(flood.Idle))
		}
	})

	t.Run("apid", func(t *testing.T) {
		f := startFlood(t, flood.Config{
			Target: net.JoinHostPort(cp.Address, strconv.Itoa(wire.APIDPort)),
			TLS:    a.tlsFor(cp.Address),
			Idle:   floodIdle, Silent: floodSilent, HalfHello: floodHalfHello,
		}, apid.MaxConnectionsPerSource)

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		if _, err := machine.NewMachineServiceClient(a.conn(t, cp.Address)).Version(ctx, &emptypb.Empty{}); err != nil {
			t.Fatalf("an admin call failed during the flood: %v", err)
		}

		// The idle connections that got a slot made no call: apid closes
		// them, which it never did before.
		waitFor(t, "apid closing the flood's idle TLS connections", func() error {
			if got := f.Counts(flood.Idle); got.Closed == 0 {
				return fmt.Errorf("none closed: %+v", got)
			}

			return nil
		})
	})

	t.Run("many sources", func(t *testing.T) { testFloodFromManySources(t, c, a) })
}

// startFlood starts cfg from floodSource, stopped when the test ends, and
// waits until the flood's source holds at least max connections: its
// whole share.
func startFlood(t *testing.T, cfg flood.Config, max int) *flood.Flood {
	t.Helper()

	cfg.Source = floodSource

	f := flood.Start(context.Background(), cfg)
	t.Cleanup(func() {
		f.Stop()
		t.Logf("flood of %s: idle %+v, silent %+v, half hello %+v", cfg.Target,
			f.Counts(flood.Idle), f.Counts(flood.Silent), f.Counts(flood.HalfHello))
	})

	waitFor(t, "the flood holding its share of connections", func() error {
		var open int64
		for _, k := range []flood.Kind{flood.Idle, flood.Silent, flood.HalfHello} {
			open += f.Counts(k).Open
		}

		if open < int64(max) {
			return fmt.Errorf("%d open, want %d", open, max)
		}

		return nil
	})

	return f
}

// workerJoinConfig is a new worker's join configuration for the cluster:
// its token, its CA, the control plane as endpoint.
func workerJoinConfig(t *testing.T, c *localcluster.Cluster, cp localcluster.Node) join.Config {
	t.Helper()

	now := time.Now()

	bundle, err := certs.LoadBundle(c.SecretsPath(), now)
	if err != nil {
		t.Fatal(err)
	}

	osCA, err := bundle.OSCA(now)
	if err != nil {
		t.Fatal(err)
	}

	cas, err := ca.NewAcceptedSet(now, osCA.Cert)
	if err != nil {
		t.Fatal(err)
	}

	tok, err := token.Parse(bundle.TrustdInfo.Token)
	if err != nil {
		t.Fatal(err)
	}

	return join.Config{
		Endpoints: []string{cp.Address}, Token: tok, CAs: cas, CA: osCA.Cert,
		Hostname: floodWorker, Source: floodWorker,
	}
}
