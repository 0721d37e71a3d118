package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/token"
)

// joinStorms runs JoinStorms storms of JoinClients clients against the
// control plane's trustd, then JoinFloorStorms of JoinFloorClients with the
// CPU time of every process they make work: the control plane's and the
// harness's, whose clients make the keys, CSRs and TLS handshakes.
func (r *run) joinStorms(ctx context.Context, e *clusterEnv) error {
	base, err := joinConfig(e)
	if err != nil {
		return err
	}

	if r.res.Join, err = r.stormSeries(ctx, "join storm", r.plan.JoinClients, r.plan.JoinStorms, base, nil); err != nil {
		return err
	}

	procs := maps.Clone(e.cpProcs)
	procs["harness"] = os.Getpid()

	r.res.JoinFloor, err = r.stormSeries(ctx, "join storm, CPU measured", r.plan.JoinFloorClients, r.plan.JoinFloorStorms, base, procs)

	return err
}

// stormSeries runs storms storms of n clients, each on base, and measures
// the CPU time of procs (by name) around each one; none if procs is empty.
func (r *run) stormSeries(ctx context.Context, label string, n, storms int, base join.Config, procs map[string]int) (*JoinStorm, error) {
	j := &JoinStorm{Clients: n}

	var all []time.Duration

	for i := range storms {
		before := cpuTimes(procs)

		total, lat, retries, err := storm(ctx, n, base)
		if err != nil {
			return nil, err
		}

		line := fmt.Sprintf("%s %d/%d: %d clients in %s, %d retries", label, i+1, storms, n, formatDuration(total), retries)
		if len(procs) > 0 {
			cpu, by := cpuSpent(before, cpuTimes(procs))
			j.CPU = append(j.CPU, cpu)
			line += fmt.Sprintf(", %s of CPU (%s)", formatDuration(cpu), by)
		}

		r.logf("%s", line)
		j.Totals, j.Retries, all = append(j.Totals, total), j.Retries+retries, append(all, lat...)
	}

	j.Latency = Summarize(all)

	return j, nil
}

// cpuTimes reads the CPU time of each process so far, by name.
func cpuTimes(procs map[string]int) map[string]time.Duration {
	out := make(map[string]time.Duration, len(procs))
	for name, pid := range procs {
		out[name] = cpuTime([]int{pid})
	}

	return out
}

// cpuSpent is the CPU time spent between two readings, in all and by
// process ("trustd 1.2s, harness 0.9s, ..."), the largest first.
func cpuSpent(before, after map[string]time.Duration) (time.Duration, string) {
	names := slices.SortedFunc(maps.Keys(after), func(a, b string) int {
		return cmp.Compare(after[b]-before[b], after[a]-before[a])
	})

	var (
		total time.Duration
		parts []string
	)

	for _, name := range names {
		d := after[name] - before[name]
		total += d
		parts = append(parts, name+" "+formatDuration(d))
	}

	return total, strings.Join(parts, ", ")
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
