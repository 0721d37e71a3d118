package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/e2e/flood"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd"
)

// ConnFloodPlan is how much load the connection-flood stage makes.
type ConnFloodPlan struct {
	// Joins are made one after the other, first with no flood, then while
	// one source holds its maximum of idle connections.
	Joins int
	// Sources flood trustd and apid together for Hold, each trying to hold
	// an idle TLS, a silent and a half-ClientHello connection to each, so
	// that together they try to hold several times both servers' tables
	// while no source comes near its own cap; Joins more joins, then as
	// many admin calls of Version through apid, are made meanwhile.
	Sources int
	Hold    time.Duration
	// After are the times after the flood when the servers' memory is read
	// again. Go returns freed memory once a collection has run, which an
	// idle server may not need before the runtime's forced one, every two
	// minutes.
	After []time.Duration
}

// ConnFloodPlans are the stage's loads, by Plan.Name.
var ConnFloodPlans = map[string]ConnFloodPlan{
	"full":  {Joins: 200, Sources: 2000, Hold: 30 * time.Second, After: []time.Duration{10 * time.Second, 150 * time.Second}},
	"quick": {Joins: 50, Sources: 2000, Hold: 10 * time.Second, After: []time.Duration{10 * time.Second}},
}

// Where the stage's servers listen and its floods come from.
var (
	// ConnFloodCIDR holds the stage's one-node cluster.
	ConnFloodCIDR = netip.MustParsePrefix("127.7.4.0/24")
	// ConnFloodSources hold the flooding source addresses (floodSource):
	// room for 2,000 sources, 250 of each /24.
	ConnFloodSources = netip.MustParsePrefix("127.7.24.0/21")
	// ConnFloodJoiner is the address the stage's joins come from and ask
	// for, as a worker asks for its own address: in the cluster's range,
	// above its one node.
	ConnFloodJoiner = netip.MustParseAddr("127.7.4.250")
)

// floodRedial is how soon a flood makes again a connection the server
// closed: a second bounds the rate at the connections tried per second.
const floodRedial = time.Second

// ConnFlood is joins and memory under connection floods.
type ConnFlood struct {
	// PerSource is trustd's per-source cap: what the join flood holds.
	PerSource int `json:"per_source"`
	// Quiet are joins with no flood, Flooded the same joins while one
	// source holds PerSource idle TLS connections and floods silent ones,
	// Full those while Sources sources hold every slot they can.
	Quiet   Summary `json:"joins_quiet"`
	Flooded Summary `json:"joins_flooded"`
	Full    Summary `json:"joins_sources_flooding"`
	// Versions are an admin's calls of Version through apid, each over a
	// new connection, while Sources sources flood; VersionFailures counts
	// those that failed, which Versions leaves out.
	Versions        Summary `json:"versions_sources_flooding"`
	VersionFailures int     `json:"version_failures"`
	// Sources flooded trustd and apid together for the memory figures.
	Sources int          `json:"sources"`
	Memory  []FloodedRSS `json:"memory"`
}

// FloodedRSS is a server's VmRSS before, during and after a flood. Bytes.
type FloodedRSS struct {
	Process string `json:"process"`
	Idle    uint64 `json:"idle_rss_bytes"`
	// Peak is the highest VmRSS sampled during the flood.
	Peak uint64 `json:"peak_rss_bytes"`
	// After is VmRSS at times after the flood ended.
	After []RSSAt `json:"after"`
	// Open is the most connections the flood held at once.
	Open int64 `json:"flood_open_max"`
}

// RSSAt is VmRSS read Wait after an event.
type RSSAt struct {
	Wait time.Duration `json:"wait_ns"`
	RSS  uint64        `json:"rss_bytes"`
}

// connFlood boots a one-node cluster, times joins with and without one
// source holding its maximum of connections to trustd, then floods trustd
// and apid from many sources and reads their memory during and after.
func (r *run) connFlood(ctx context.Context) (err error) {
	p, ok := ConnFloodPlans[r.plan.Name]
	if !ok {
		return fmt.Errorf("bench: no connection-flood plan for %q", r.plan.Name)
	}

	c, err := r.createCluster(ctx, "flood", ConnFloodCIDR, 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.destroy(c)) }()

	e, err := newClusterEnv(ctx, c)
	if err != nil {
		return err
	}
	defer e.cli.Close() //nolint:errcheck // a client; the cluster's stop is what counts

	res := &ConnFlood{PerSource: trustd.MaxConnectionsPerSource, Sources: p.Sources}
	r.res.Flood = res

	if err = r.floodedJoins(ctx, e, p, res); err != nil {
		return err
	}

	return r.floodedMemory(ctx, e, p, res)
}

// floodedJoins times p.Joins joins with no flood, then as many while the
// first flooding source holds its maximum of idle TLS connections to trustd
// and floods it with connections that never send a ClientHello.
func (r *run) floodedJoins(ctx context.Context, e *clusterEnv, p ConnFloodPlan, res *ConnFlood) error {
	base, err := joinConfig(e)
	if err != nil {
		return err
	}

	r.logf("connection flood: %d joins, quiet", p.Joins)

	if res.Quiet, err = joins(ctx, base, p.Joins, "quiet"); err != nil {
		return err
	}

	target := net.JoinHostPort(e.cp.Address, strconv.Itoa(wire.TrustdPort))
	f := flood.Start(ctx, flood.Config{
		Target: target, Source: floodSource(0), TLS: trustdTLS(e, base.CAs),
		Idle: 2 * res.PerSource, Silent: 10 * res.PerSource, Redial: floodRedial,
	})
	defer f.Stop()

	if err = waitHolding(ctx, []*flood.Flood{f}, res.PerSource); err != nil {
		return err
	}

	r.logf("connection flood: %d joins while %s holds %d connections to trustd", p.Joins, floodSource(0), res.PerSource)

	res.Flooded, err = joins(ctx, base, p.Joins, "flooded")

	return err
}

// joins makes n joins one after the other, each a new worker with its own
// key calling from ConnFloodJoiner, and returns their latencies.
func joins(ctx context.Context, base join.Config, n int, name string) (Summary, error) {
	lat := make([]time.Duration, 0, n)

	for i := range n {
		cfg := base
		cfg.Hostname, cfg.Source = ConnFloodJoiner.String(), ConnFloodJoiner.String()

		c, err := join.New(cfg)
		if err != nil {
			return Summary{}, err
		}

		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		t0 := time.Now()
		_, err = c.Join(cctx)

		cancel()

		if err != nil {
			return Summary{}, fmt.Errorf("join %d (%s): %w", i, name, err)
		}

		lat = append(lat, time.Since(t0))
	}

	return Summarize(lat), nil
}

// floodedMemory floods trustd and apid together from p.Sources sources,
// each trying to hold an idle TLS, a silent and a half-hello connection to
// each, from a flood process of its own (floodproc.go), and reads both
// servers' memory before, during and after.
func (r *run) floodedMemory(ctx context.Context, e *clusterEnv, p ConnFloodPlan, res *ConnFlood) error {
	base, err := joinConfig(e)
	if err != nil {
		return err
	}

	admin, err := adminTLS(e)
	if err != nil {
		return err
	}

	names, spec := []string{"trustd", "apid"}, floodSpec{Sources: p.Sources, Redial: floodRedial}
	for _, port := range []int{wire.TrustdPort, wire.APIDPort} {
		spec.Targets = append(spec.Targets, net.JoinHostPort(e.cp.Address, strconv.Itoa(port)))
	}

	if err = sleep(ctx, r.plan.Settle); err != nil {
		return err
	}

	samplers := make([]*rssSampler, len(names))
	for i, name := range names {
		samplers[i] = &rssSampler{pid: e.cpProcs[name]}
		samplers[i].idle = samplers[i].read()
	}

	fp, err := startFlood(spec)
	if err != nil {
		return err
	}

	r.logf("connection flood: %d sources flood trustd and apid for %s, %d joins and %d Version calls meanwhile", p.Sources, p.Hold, p.Joins, p.Joins)

	err = r.holdWhileJoining(ctx, p, base, adminCall{tls: admin, node: e.cp.Address}, samplers, res)
	if serr := fp.stop(); err == nil {
		err = serr
	}

	if err != nil {
		return err
	}

	open := fp.held()
	for i, name := range names {
		res.Memory = append(res.Memory, FloodedRSS{Process: name, Idle: samplers[i].idle, Peak: samplers[i].peak, Open: open[i]})
	}

	return r.readAfter(ctx, p.After, samplers, res)
}

// holdWhileJoining makes p.Joins joins, then as many admin calls of
// Version, while the flood runs, and lets it run until p.Hold has passed,
// sampling the servers' memory.
func (r *run) holdWhileJoining(ctx context.Context, p ConnFloodPlan, base join.Config, admin adminCall, samplers []*rssSampler, res *ConnFlood) error {
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})

	go func() {
		defer close(sampled)
		holdAndSample(sctx, p.Hold, samplers)
	}()

	var err error

	res.Full, err = joins(ctx, base, p.Joins, "sources")
	if err == nil {
		res.Versions, res.VersionFailures = admin.versions(ctx, p.Joins)
	} else {
		stop()
	}

	<-sampled

	stop()

	return err
}

// readAfter reads the servers' memory at each of after, counted from now.
func (r *run) readAfter(ctx context.Context, after []time.Duration, samplers []*rssSampler, res *ConnFlood) error {
	r.logf("connection flood: over; reading memory after %v", after)

	start := time.Now()

	for _, wait := range after {
		if err := sleep(ctx, time.Until(start.Add(wait))); err != nil {
			return err
		}

		for i, s := range samplers {
			res.Memory[i].After = append(res.Memory[i].After, RSSAt{Wait: wait, RSS: s.read()})
		}
	}

	return nil
}

// holdAndSample lets the flood run for d, sampling the servers' memory.
func holdAndSample(ctx context.Context, d time.Duration, samplers []*rssSampler) {
	end := time.After(d)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()

	for {
		for _, s := range samplers {
			s.sample()
		}

		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-tick.C:
		}
	}
}
