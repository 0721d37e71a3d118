package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/flood"
	"github.com/aegis-os/aegis/internal/wire"
)

// rssSampler keeps the highest VmRSS of a process.
type rssSampler struct {
	pid        int
	idle, peak uint64
}

func (s *rssSampler) read() uint64 {
	rss, _, _ := readMemory(s.pid) //nolint:errcheck // a missing figure shows as "-"

	return rss
}

func (s *rssSampler) sample() { s.peak = max(s.peak, s.read()) }

// waitHolding waits until the floods hold at least n connections in all.
func waitHolding(ctx context.Context, fs []*flood.Flood, n int) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	for openOf(fs) < int64(n) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("bench: the flood never held %d connections: %w", n, err)
		}
	}

	return nil
}

func openOf(fs []*flood.Flood) int64 {
	var n int64

	for _, f := range fs {
		for _, k := range []flood.Kind{flood.Idle, flood.Silent, flood.HalfHello} {
			n += f.Counts(k).Open
		}
	}

	return n
}

func stopAll(fs []*flood.Flood) {
	var wg sync.WaitGroup

	for _, f := range fs {
		wg.Go(f.Stop)
	}

	wg.Wait()
}

// floodSource is the i-th flooding source address: 250 of each /24 of
// ConnFloodSources, from .1, so that none ends in .0 or .255.
func floodSource(i int) string {
	b := ConnFloodSources.Addr().As4()

	return netip.AddrFrom4([4]byte{b[0], b[1], b[2] + byte(i/250), byte(1 + i%250)}).String()
}

// trustdTLS is a joining node's TLS config for the cluster's trustd.
func trustdTLS(e *clusterEnv, cas *ca.AcceptedSet) *tls.Config {
	return &tls.Config{RootCAs: cas.Pool(), ServerName: e.cp.Address, MinVersion: tls.VersionTLS13}
}

// adminTLS is the cluster admin's TLS config for the control plane's apid.
func adminTLS(e *clusterEnv) (*tls.Config, error) {
	cfg, err := certs.LoadClientConfig(e.c.ClientConfigPath())
	if err != nil {
		return nil, err
	}

	_, cc, err := cfg.Current()
	if err != nil {
		return nil, err
	}

	set, err := ca.ParseAcceptedSet(cc.CA, time.Now())
	if err != nil {
		return nil, err
	}

	pair, err := tls.X509KeyPair(cc.Crt, cc.Key)
	if err != nil {
		return nil, err
	}

	return &tls.Config{
		RootCAs: set.Pool(), ServerName: e.cp.Address, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13,
	}, nil
}

// adminCall is an admin's call of Version through a node's apid.
type adminCall struct {
	tls  *tls.Config
	node string
}

// versions calls Version n times one after the other, each over a new
// connection as a command-line client makes, and returns the latencies of
// those that succeeded and the count of those that failed.
func (a adminCall) versions(ctx context.Context, n int) (Summary, int) {
	lat := make([]time.Duration, 0, n)
	failed := 0

	for range n {
		t0 := time.Now()
		if err := a.version(ctx); err != nil {
			failed++

			continue
		}

		lat = append(lat, time.Since(t0))
	}

	return Summarize(lat), failed
}

func (a adminCall) version(ctx context.Context) error {
	conn, err := grpc.NewClient(net.JoinHostPort(a.node, strconv.Itoa(wire.APIDPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(a.tls)))
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a client connection

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	_, err = machine.NewMachineServiceClient(conn).Version(ctx, &emptypb.Empty{})

	return err
}
