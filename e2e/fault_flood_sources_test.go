package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/e2e/flood"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/trustd"
)

// The flood of many sources: each source holds one connection to each
// server, an idle TLS one for a quarter of the sources, a silent one for
// half and a half-ClientHello for the rest, so that no source holds more
// than any newcomer and together they hold more than apid's
// MaxConnections (the larger table). The sources are 127.8.15.1 to
// 127.8.19.200.
const (
	manySources     = apid.MaxConnections + 176
	manyTries       = 7
	manyTryTimeout  = 5 * time.Second
	manyTryEvery    = 500 * time.Millisecond
	manySettle      = 2 * trustd.SlotWait
	manyFloodRedial = time.Second
)

// manySource is the i-th source of the flood of many sources, and the
// kind of connection it holds.
func manySource(i int) (string, flood.Kind) {
	kind := flood.Silent

	switch i % 4 {
	case 0:
		kind = flood.Idle
	case 1:
		kind = flood.HalfHello
	}

	return fmt.Sprintf("127.8.%d.%d", 15+i/250, 1+i%250), kind
}

// testFloodFromManySources: while manySources sources hold every
// connection they can to trustd and apid, each of manyTries joins with a
// valid token succeeds at its one attempt, and each of manyTries admin
// calls of Version, each over a new connection, answers.
func testFloodFromManySources(t *testing.T, c *localcluster.Cluster, a admin) {
	cp := c.Nodes[0]
	joinCfg := workerJoinConfig(t, c, cp)
	joinCfg.MaxAttempts, joinCfg.CallTimeout = 1, manyTryTimeout

	servers := []struct {
		port  int
		tls   *tls.Config
		total int
	}{
		{wire.TrustdPort, &tls.Config{RootCAs: joinCfg.CAs.Pool(), ServerName: cp.Address, MinVersion: tls.VersionTLS13}, trustd.MaxConnections},
		{wire.APIDPort, a.tlsFor(cp.Address), apid.MaxConnections},
	}

	for _, s := range servers {
		startManySources(t, net.JoinHostPort(cp.Address, strconv.Itoa(s.port)), s.tls, s.total)
	}

	// In its first seconds a flood from fresh addresses looks like a join
	// storm, whose members a newcomer waits behind (connlimit.MinEvictAge,
	// SlotWait); the tries start once the servers have closed the flood's
	// connections for a few rounds and know its sources (suspects).
	time.Sleep(manySettle)

	// The tries are spread over a few seconds, so that the later ones
	// meet the flood churning: sources whose connection was evicted make
	// it again a second later.
	pace := time.NewTicker(manyTryEvery)
	defer pace.Stop()

	for i := range manyTries {
		worker, err := join.New(joinCfg)
		if err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		if _, err = worker.Join(context.Background()); err != nil {
			t.Errorf("join %d of %d during the flood: %v", i+1, manyTries, err)
		} else {
			t.Logf("join %d: %s", i+1, time.Since(start).Round(time.Millisecond))
		}

		start = time.Now()
		if err = versionOverNewConnection(t, a, cp.Address); err != nil {
			t.Errorf("Version %d of %d during the flood: %v", i+1, manyTries, err)
		} else {
			t.Logf("Version %d: %s", i+1, time.Since(start).Round(time.Millisecond))
		}

		<-pace.C
	}
}

// startManySources floods target from manySources sources, stopped when
// the test ends, and waits until they hold total connections or the
// server closes some: every slot is taken.
func startManySources(t *testing.T, target string, cfg *tls.Config, total int) {
	t.Helper()

	floods := make([]*flood.Flood, manySources)
	for i := range floods {
		src, kind := manySource(i)
		fc := flood.Config{Target: target, Source: src, TLS: cfg, Redial: manyFloodRedial, DialTimeout: manyTryTimeout}

		switch kind {
		case flood.Idle:
			fc.Idle = 1
		case flood.HalfHello:
			fc.HalfHello = 1
		default:
			fc.Silent = 1
		}

		floods[i] = flood.Start(context.Background(), fc)
	}

	counts := func(k flood.Kind) (sum flood.Counts) {
		for _, f := range floods {
			c := f.Counts(k)
			sum.Open, sum.Made, sum.Failed, sum.Closed = sum.Open+c.Open, sum.Made+c.Made, sum.Failed+c.Failed, sum.Closed+c.Closed
		}

		return sum
	}

	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, f := range floods {
			wg.Go(f.Stop)
		}

		wg.Wait()

		t.Logf("flood of %s from %d sources: idle %+v, silent %+v, half hello %+v", target, manySources,
			counts(flood.Idle), counts(flood.Silent), counts(flood.HalfHello))
	})

	// Before the handshake deadline, a server closes a connection that
	// sent nothing or half a ClientHello only when every slot is taken.
	waitFor(t, "the flood taking every slot of "+target, func() error {
		open := counts(flood.Idle).Open + counts(flood.Silent).Open + counts(flood.HalfHello).Open
		if closed := counts(flood.Silent).Closed + counts(flood.HalfHello).Closed; open < int64(total) && closed == 0 {
			return fmt.Errorf("%d open and none closed, want %d open or some closed", open, total)
		}

		return nil
	})
}

// versionOverNewConnection calls Version as admin over a connection of its
// own, made for the call.
func versionOverNewConnection(t *testing.T, a admin, node string) error {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), manyTryTimeout)
	defer cancel()

	conn := a.conn(t, node)
	defer conn.Close()

	_, err := machine.NewMachineServiceClient(conn).Version(ctx, &emptypb.Empty{})

	return err
}
