package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/join"
)

// joinStorms runs JoinStorms storms of JoinClients clients against the
// control plane's trustd.
func (r *run) joinStorms(ctx context.Context, e *clusterEnv) error {
	base, err := joinConfig(e)
	if err != nil {
		return err
	}

	j := &JoinStorm{Clients: r.plan.JoinClients}

	var all []time.Duration

	for i := range r.plan.JoinStorms {
		total, lat, retries, err := storm(ctx, r.plan.JoinClients, base)
		if err != nil {
			return err
		}

		r.logf("join storm %d/%d: %d clients in %s, %d retries", i+1, r.plan.JoinStorms, r.plan.JoinClients, formatDuration(total), retries)
		j.Totals, j.Retries, all = append(j.Totals, total), j.Retries+retries, append(all, lat...)
	}

	j.Latency = Summarize(all)
	r.res.Join = j

	return nil
}

// joinConfig is a worker's join configuration for the cluster, less the
// hostname: the control plane as endpoint, the cluster's token and CA.
func joinConfig(e *clusterEnv) (join.Config, error) {
	now := time.Now()

	bundle, err := certs.LoadBundle(e.c.SecretsPath(), now)
	if err != nil {
		return join.Config{}, err
	}

	osCA, err := bundle.OSCA(now)
	if err != nil {
		return join.Config{}, err
	}

	cas, err := ca.NewAcceptedSet(now, osCA.Cert)
	if err != nil {
		return join.Config{}, err
	}

	tok, err := token.Parse(bundle.TrustdInfo.Token)
	if err != nil {
		return join.Config{}, err
	}

	return join.Config{Endpoints: []string{e.cp.Address}, Token: tok, CAs: cas, CA: osCA.Cert}, nil
}

// storm makes n join clients, then lets them all join at once: each makes
// its key and CSR and calls trustd on a new connection, retrying with the
// client's own backoff. It returns the time until the last one held its
// certificate, each one's time, and the failed attempts retried.
func storm(ctx context.Context, n int, base join.Config) (time.Duration, []time.Duration, int, error) {
	retries := &lineCounter{}

	clients, err := stormClients(n, base, slog.New(slog.NewTextHandler(retries, nil)))
	if err != nil {
		return 0, nil, 0, err
	}

	ctx, cancel := context.WithTimeout(ctx, stormTimeout)
	defer cancel()

	var (
		wg       sync.WaitGroup
		released = make(chan struct{})
		t0       time.Time
		lat      = make([]time.Duration, n)
		fails    = make([]error, n)
	)

	for i, c := range clients {
		wg.Go(func() {
			<-released
			_, fails[i] = c.Join(ctx)
			lat[i] = time.Since(t0)
		})
	}

	t0 = time.Now()
	close(released)
	wg.Wait()

	if failed := slices.DeleteFunc(fails, func(err error) bool { return err == nil }); len(failed) > 0 {
		return 0, nil, 0, fmt.Errorf("%d of %d clients failed to join, first: %w", len(failed), n, failed[0])
	}

	return slices.Max(lat), lat, int(retries.lines.Load()), nil
}

// stormClients makes n join clients, each calling from an address of its
// own in JoinSources and asking for it, as workers do.
func stormClients(n int, base join.Config, log *slog.Logger) ([]*join.Client, error) {
	if n > 1<<(32-JoinSources.Bits())-2 {
		return nil, fmt.Errorf("bench: %d join clients, more than the addresses of %s", n, JoinSources)
	}

	clients := make([]*join.Client, n)
	addr := JoinSources.Masked().Addr()

	for i := range clients {
		addr = addr.Next()

		cfg := base
		cfg.Hostname, cfg.Source, cfg.Logger = addr.String(), addr.String(), log
		// Client i starts on endpoint i: a storm over several control
		// planes is spread over all of them.
		cfg.Endpoints = append(slices.Clone(base.Endpoints[i%len(base.Endpoints):]), base.Endpoints[:i%len(base.Endpoints)]...)

		c, err := join.New(cfg)
		if err != nil {
			return nil, err
		}

		clients[i] = c
	}

	return clients, nil
}

// lineCounter counts the lines written to it: the join clients log one per
// failed attempt.
type lineCounter struct{ lines atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines.Add(int64(bytes.Count(p, []byte{'\n'})))

	return len(p), nil
}
