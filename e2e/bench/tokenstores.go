package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/token"
)

// TokenStores compares trustd's two token stores in one run, with a
// limited-use stored token (every certificate counts a use): the etcd store
// of a formed cluster of control planes, and the bbolt store a control
// plane keeps until its cluster's etcd is formed. The storm is JoinClients
// clients spread over the control planes with one stored token.
type TokenStores struct {
	ControlPlanes int `json:"control_planes"`
	// Bbolt and Etcd are calls one after the other from one caller.
	Bbolt Case `json:"bbolt_one_connection"`
	Etcd  Case `json:"etcd_one_connection"`
	// Concurrent is TokenStoreCallers callers at once, all with the same
	// token: the bbolt store's figures, then the etcd store's.
	Concurrent []Saturated `json:"concurrent,omitempty"`
	// Storm's clients start on the control planes in turn.
	Storm *JoinStorm `json:"storm,omitempty"`
}

// TokenBboltCIDR holds the control plane whose etcd is never formed, so
// that its trustd keeps its tokens in bbolt.
var TokenBboltCIDR = netip.MustParsePrefix("127.7.7.0/24")

// TokenStoreCallers call trustd at once in the concurrent case of the token
// stores: a join storm's worth of callers on one control plane, few enough
// that trustd's own CPU is not what limits them on two cores.
const TokenStoreCallers = 8

// tokenStoreUses is the limit of the stored tokens the loads use: limited,
// so each use is counted, and beyond any run's calls.
const tokenStoreUses = 1 << 30

// tokenStores runs the token-store loads against the etcd stage's formed
// cluster c and a control plane of its own whose etcd stays unformed.
func (r *run) tokenStores(ctx context.Context, c *localcluster.Cluster) error {
	ts := &TokenStores{ControlPlanes: len(c.ControlPlanes())}

	r.logf("token stores: a control plane on %s keeping its tokens in bbolt", TokenBboltCIDR)

	bc, err := r.etcdCluster(ctx, "tokens-bbolt", TokenBboltCIDR, 1, 0, true)
	if err != nil {
		return err
	}

	etcdTD, err := storedTokenTrustd(ctx, c)
	if err != nil {
		return fmt.Errorf("etcd store: %w", err)
	}
	defer etcdTD.conn.Close() //nolint:errcheck // bench client

	boltTD, err := storedTokenTrustd(ctx, bc)
	if err != nil {
		return fmt.Errorf("bbolt store: %w", err)
	}
	defer boltTD.conn.Close() //nolint:errcheck // bench client

	etcdMeters, err := trustdMeters(c)
	if err != nil {
		return err
	}

	boltMeters, err := trustdMeters(bc)
	if err != nil {
		return err
	}

	p := r.plan

	lat, err := compare(ctx, p.Rounds, p.Budget,
		variant{"bbolt store", p.IssueCalls, boltTD.callOne, boltMeters},
		variant{"etcd store", p.IssueCalls, etcdTD.callOne, etcdMeters},
	)
	if err != nil {
		return err
	}

	ts.Bbolt, ts.Etcd = lat[0].Case(), lat[1].Case()
	r.res.TokenStores = ts
	r.logf("token stores: limited-use token, bbolt %.0f/s, etcd %.0f/s (%.2f×)",
		ts.Bbolt.PerSecond(), ts.Etcd.PerSecond(), Ratio(ts.Etcd.PerSecond(), ts.Bbolt.PerSecond()))

	if ts.Concurrent, err = concurrentStores(ctx, p, boltTD, etcdTD, boltMeters[1][0], etcdMeters[1][0]); err != nil {
		return err
	}

	r.logf("token stores: %d callers, bbolt %.0f/s, etcd %.0f/s (%.2f×)", TokenStoreCallers,
		ts.Concurrent[0].PerSecond(), ts.Concurrent[1].PerSecond(), Ratio(ts.Concurrent[1].PerSecond(), ts.Concurrent[0].PerSecond()))

	ts.Storm, err = r.storeStorms(ctx, c)

	return err
}

// concurrentStores has TokenStoreCallers callers at once call each store's
// trustd with its token, the stores interleaved in rounds, and returns the
// bbolt store's figures, then the etcd store's.
func concurrentStores(ctx context.Context, p Plan, bolt, etcd *trustdServer, boltPID, etcdPID int) ([]Saturated, error) {
	var cases []saturatedCase

	for _, s := range []struct {
		name string
		td   *trustdServer
		pid  int
	}{{"bbolt store", bolt, boltPID}, {"etcd store", etcd, etcdPID}} {
		call, closeConns, err := s.td.multiConn(TokenStoreCallers)
		if err != nil {
			return nil, err
		}
		defer closeConns()

		cases = append(cases, saturatedCase{server: s.name, callers: TokenStoreCallers, pid: s.pid, call: call})
	}

	return interleaveParallel(ctx, p, p.IssueCalls, cases)
}

// trustdMeters charge a call with the CPU time of the first control
// plane's trustd and the harness's (the client), then of trustd alone.
// etcd's is left out: on a real cluster it is spread over the machines.
func trustdMeters(c *localcluster.Cluster) ([][]int, error) {
	procs, err := nodeProcesses(c.ControlPlanes()[0])
	if err != nil {
		return nil, err
	}

	td, ok := procs["trustd"]
	if !ok {
		return nil, fmt.Errorf("bench: no trustd under %s's machined", c.ControlPlanes()[0].Name)
	}

	return [][]int{{td, os.Getpid()}, {td}}, nil
}

// storedTokenTrustd makes a limited-use token through the first control
// plane's apid and returns a client of that control plane's trustd on one
// kept connection, calling with it.
func storedTokenTrustd(ctx context.Context, c *localcluster.Cluster) (*trustdServer, error) {
	cp := c.ControlPlanes()[0]

	tok, err := createStoredToken(ctx, c, tokenStoreUses)
	if err != nil {
		return nil, err
	}

	base, err := joinConfig(&clusterEnv{c: c, cp: cp})
	if err != nil {
		return nil, err
	}

	key, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		return nil, err
	}

	csrPEM, err := ca.NewCSR(key, IssueSource, []string{IssueSource})
	if err != nil {
		return nil, err
	}

	td := &trustdServer{addr: net.JoinHostPort(cp.Address, strconv.Itoa(wire.TrustdPort)), tok: tok, csr: csrPEM}
	if err = td.dial(base.CAs, cp.Address); err != nil {
		return nil, err
	}

	return td, nil
}

// createStoredToken makes a token through the cluster's first control plane.
func createStoredToken(ctx context.Context, c *localcluster.Cluster, uses uint32) (token.Token, error) {
	cli, err := c.Client(ctx)
	if err != nil {
		return token.Token{}, err
	}
	defer cli.Close() //nolint:errcheck // bench client

	resp, err := tokens.NewTokenServiceClient(cli.Conn()).Create(ctx, &tokens.CreateRequest{MaxUses: uses, Description: "bench"})
	if err != nil {
		return token.Token{}, err
	}

	return token.Parse(resp.GetMessages()[0].GetToken())
}

// storeStorms runs JoinStorms storms of JoinClients clients over every
// control plane of c, with one stored limited-use token for all.
func (r *run) storeStorms(ctx context.Context, c *localcluster.Cluster) (*JoinStorm, error) {
	base, err := joinConfig(&clusterEnv{c: c, cp: c.ControlPlanes()[0]})
	if err != nil {
		return nil, err
	}

	base.Endpoints = nil
	for _, cp := range c.ControlPlanes() {
		base.Endpoints = append(base.Endpoints, cp.Address)
	}

	if base.Token, err = createStoredToken(ctx, c, tokenStoreUses); err != nil {
		return nil, err
	}

	return r.stormSeries(ctx, fmt.Sprintf("token stores: join storm over %d control planes, stored token", len(base.Endpoints)),
		r.plan.JoinClients, r.plan.JoinStorms, base, nil)
}
