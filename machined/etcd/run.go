package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// clusterState is how a start of the member finds its cluster.
type clusterState int

const (
	fromData        clusterState = iota // the data folder knows the cluster
	newCluster                          // bootstrap: a cluster of this member alone
	existingCluster                     // join: the member was added to a running cluster
)

// startPlan is how one start of the member runs.
type startPlan struct {
	state   clusterState
	initial string // --initial-cluster, for a new or joined cluster
	// peers are the peer URLs of a join's membership, sorted and joined:
	// what etcd compares with the running members' at the start.
	peers string
}

// joinPlan is the start with the existing cluster of the members in list,
// the member self under this node's name.
func joinPlan(list []member, self uint64, name string) startPlan {
	return startPlan{state: existingCluster, initial: initialCluster(list, self, name), peers: peerSet(list)}
}

// peerSet is the peer URLs of list, sorted and joined.
func peerSet(list []member) string {
	var urls []string
	for _, m := range list {
		urls = append(urls, m.peerURLs...)
	}

	slices.Sort(urls)

	return strings.Join(urls, ",")
}

// stale reports whether a join's plan no longer matches the membership in
// list: etcd ends at once a member started with other peers than the
// running members hold (another control plane added meanwhile).
func (p startPlan) stale(list []member) bool {
	return p.state == existingCluster && p.peers != peerSet(list)
}

// memberRunner prepares each start (rejoin, bootstrap or join) and runs the
// server; the service's restart policy wraps it, so a crashed member is
// prepared again and finds out whether it was removed meanwhile.
type memberRunner struct{ e *Etcd }

func (r memberRunner) String() string { return "etcd " + r.e.cfg.Binary }

// Run prepares a start and runs the server. A join whose member ended
// while the membership changed from its plan (a learner of another
// control plane added as this one started) is prepared and started again
// at once, up to maxReplans times, rather than after the restart
// policy's backoff: the plan was stale, not the member broken.
func (r memberRunner) Run(ctx context.Context, notify runner.Notify) error {
	for replans := 0; ; replans++ {
		plan, err := r.e.prepare(ctx, notify)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}

			return err
		}

		err = r.runMember(ctx, plan, notify)
		if err == nil || ctx.Err() != nil || replans == maxReplans || !r.e.planStale(ctx, plan) {
			return err
		}

		r.e.log.Info("the membership changed as the member started; starting again with the membership of now",
			slog.String(logkey.Error, err.Error()))
	}
}

// planStale reports whether the other control planes answer with a
// membership that plan does not match; no answer counts as not stale.
func (e *Etcd) planStale(ctx context.Context, plan startPlan) bool {
	if plan.state != existingCluster {
		return false
	}

	list, err := e.peerMembers(ctx)

	return err == nil && plan.stale(list)
}

// runMember runs the server with plan until it ends, following its
// promotion meanwhile.
func (r memberRunner) runMember(ctx context.Context, plan startPlan, notify runner.Notify) error {
	r.e.log.Info("starting etcd", slog.String(logkey.State, plan.state.String()))

	ended := r.e.loadedTrust()
	defer ended()

	runCtx, cancel := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() { r.e.afterStart(runCtx) })

	newRunner := r.e.cfg.Runner
	if newRunner == nil {
		newRunner = runner.Process
	}

	if err := os.MkdirAll(RunDir(r.e.cfg.Dir), 0o700); err != nil {
		cancel()
		wg.Wait()

		return fmt.Errorf("etcd: %w", err)
	}

	err := newRunner(runner.ProcessConfig{
		Path: r.e.cfg.Binary, Args: r.e.args(plan), Log: r.e.cfg.Log, Clock: r.e.cfg.Clock, Nice: Nice,
	}).Run(ctx, notify)

	cancel()
	wg.Wait()

	return err
}

func (s clusterState) String() string {
	switch s {
	case newCluster:
		return "new"
	case existingCluster:
		return "existing"
	default:
		return "data"
	}
}

// args are the server's flags: mTLS for clients and peers with the files
// of pkiDir (peers proving PeerName), the node's address for both, and the
// cluster to start with. The client port serves gRPC alone, on gRPC's own
// server: etcd serves gRPC next to HTTP on one port through Go's HTTP
// server instead, a handler and its allocations per call, which took most
// of etcd's CPU under the heartbeats of a thousand nodes. Its HTTP (health,
// metrics, the gRPC gateway), which Aegis does not use, moves to a socket
// in the member's run folder (RunDir), under the same mTLS.
func (e *Etcd) args(p startPlan) []string {
	args := []string{
		"--name", e.cfg.Name,
		"--data-dir", e.dataDir(),
		"--listen-client-urls", e.ClientURL(),
		"--listen-client-http-urls", e.httpURL(),
		"--advertise-client-urls", e.ClientURL(),
		"--listen-peer-urls", e.peerURL(),
		"--initial-advertise-peer-urls", e.peerURL(),
		"--cert-file", e.certFile("server"), "--key-file", e.keyFile("server"),
		"--trusted-ca-file", e.caFile(), "--client-cert-auth",
		"--peer-cert-file", e.certFile("peer"), "--peer-key-file", e.keyFile("peer"),
		"--peer-trusted-ca-file", e.caFile(), "--peer-client-cert-auth",
		"--peer-cert-allowed-hostname", PeerName,
		"--initial-cluster-token", e.cfg.ClusterToken,
		"--logger", "zap", "--log-outputs", "stderr", "--log-format", e.logFormat(),
		"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "5m",
		"--max-learners", strconv.Itoa(maxLearners),
	}

	if p.state != fromData {
		args = append(args, "--initial-cluster", p.initial, "--initial-cluster-state", p.state.String())
	}

	return args
}

// prepare decides how the member starts: from its data, unless the cluster
// removed it meanwhile (the data is then dropped); else as a new cluster
// once Bootstrap asks; else as a learner of a cluster found at the
// control-plane endpoints. It waits until one of them applies.
func (e *Etcd) prepare(ctx context.Context, notify runner.Notify) (startPlan, error) {
	if e.hasData() {
		if !e.removed(ctx) {
			return startPlan{state: fromData}, nil
		}

		e.log.Warn("this member was removed from the cluster; dropping its data to join afresh")

		if err := e.dropData(); err != nil {
			return startPlan{}, err
		}
	}

	// What a failed start left (no WAL) goes: the member joins afresh.
	if err := os.RemoveAll(e.dataDir()); err != nil {
		return startPlan{}, fmt.Errorf("etcd: %w", err)
	}

	return e.waitForPlan(ctx, notify)
}

// waitForPlan looks for a bootstrap request or a cluster to join until
// one comes or ctx ends.
func (e *Etcd) waitForPlan(ctx context.Context, notify runner.Notify) (startPlan, error) {
	shown := ""

	for {
		e.mu.Lock()
		req, wake := e.bootstrap, e.wake
		e.mu.Unlock()

		if req != nil {
			return e.planBootstrap(ctx, req)
		}

		plan, order, err := e.join(ctx)
		if err == nil {
			return e.awaitEarlier(ctx, plan, order, notify)
		}

		// One event per change of reason, not one per look.
		if msg := "waiting for bootstrap or a cluster to join: " + err.Error(); msg != shown {
			notify(false, msg)
			shown = msg
		}

		// The cluster answered; only the addition did not: asked again
		// at once (the call itself took memberChangeTimeout).
		if errors.Is(err, errChangeUnanswered) && ctx.Err() == nil {
			continue
		}

		t := e.cfg.Clock.NewTimer(discoverDelay())

		select {
		case <-ctx.Done():
			t.Stop()

			return startPlan{}, ctx.Err()
		case <-wake:
		case <-t.C():
		}

		t.Stop()
	}
}

// discoverDelay is discoverPeriod give or take half of it, at random:
// control planes that boot together find the cluster at the same moment,
// and two membership changes proposed at once lose one (see addSelf).
func discoverDelay() time.Duration {
	return discoverPeriod/2 + rand.N(discoverPeriod)
}

// planBootstrap starts a cluster of this member alone.
func (e *Etcd) planBootstrap(ctx context.Context, req *bootstrapRequest) (startPlan, error) {
	if req.snapshot != "" {
		if err := e.restore(ctx, req.snapshot); err != nil {
			return startPlan{}, err
		}

		return startPlan{state: fromData}, nil
	}

	return startPlan{state: newCluster, initial: e.cfg.Name + "=" + e.peerURL()}, nil
}

// initialCluster renders members as --initial-cluster, the member id under
// this node's name. A member that has not started has no name in etcd yet
// (another learner joining at the same time): it is named by its ID until
// it publishes its own.
func initialCluster(members []member, self uint64, name string) string {
	var parts []string

	for _, m := range members {
		n := m.name

		switch {
		case m.id == self:
			n = name
		case n == "":
			n = "member-" + formatID(m.id)
		}

		for _, u := range m.peerURLs {
			parts = append(parts, n+"="+u)
		}
	}

	return strings.Join(parts, ",")
}

// member is what the package needs of an etcd member.
type member struct {
	id       uint64
	name     string
	peerURLs []string
	learner  bool
}

func formatID(id uint64) string { return strconv.FormatUint(id, 16) }

// logFormat is etcd's --log-format for the config's TextLogs.
func (e *Etcd) logFormat() string {
	if e.cfg.TextLogs {
		return "console"
	}

	return "json"
}
