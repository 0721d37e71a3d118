package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/flood"
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

// floodSource is the i-th flooding source address.
func floodSource(i int) string {
	a := ConnFloodSources.Addr().Next().Next()
	for range i {
		a = a.Next()
	}

	return a.String()
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
