package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Timings of Leader.
const (
	// LeaderRecheck is how often Leader asks again which member leads: a
	// leader that changed meanwhile still answers through its followers,
	// at their cost, until then.
	LeaderRecheck = 10 * time.Second
	// leaderTry bounds a keep-alive sent to the member believed to lead,
	// before it goes through the cluster's client instead (a leader that
	// died must not take the whole of the caller's time), and each
	// member's answer to which member leads.
	leaderTry = time.Second
	// maxLeaderClients bounds the clients Leader keeps open, one per
	// member it has seen lead.
	maxLeaderClients = 5
)

// Leader sends lease keep-alives to the etcd member that leads. Only the
// leader renews a lease: a follower forwards each keep-alive it receives to
// the leader, over its peer HTTP, a second hop that cost the followers more
// than the keep-alive itself under the heartbeats of many nodes. Leader
// finds the leader through the cluster's client (a member's status names
// it; the member list gives its client URL), dials it with dial, and asks
// again every LeaderRecheck and after a failed call. Whenever it does not
// know the leader, or the leader's client fails, a keep-alive goes through
// the cluster's client as before: slower through a follower, never wrong.
//
// clientv3 picks one of its endpoints per call and has no way to send a
// call to the leader; this is the smallest thing that does. The
// keep-alives sent to a leader share a few streams (keepAlives, and
// keepAliveStreams for how many).
type Leader struct {
	cluster *clientv3.Client
	dial    func(endpoint string) (*clientv3.Client, error)
	clock   clock.Clock

	mu sync.Mutex
	// clients are the leaders' clients, by client URL; current is the one
	// believed to lead now ("" while unknown).
	clients map[string]*clientv3.Client
	// streams are the keep-alive streams open or being opened to the
	// leaders, by client URL (streams.go).
	streams   map[string]*keepAliveStreams
	current   string
	checked   time.Time
	resolving bool
	closed    bool
}

// NewLeader makes a Leader of the cluster cluster is a client of; dial
// makes a client of one member's client URL, with the cluster client's
// credentials. A nil clk means the system clock.
func NewLeader(cluster *clientv3.Client, dial func(endpoint string) (*clientv3.Client, error), clk clock.Clock) *Leader {
	return &Leader{
		cluster: cluster, dial: dial, clock: defaults.Clock(clk),
		clients: map[string]*clientv3.Client{},
		streams: map[string]*keepAliveStreams{},
	}
}

// KeepAliveOnce renews lease id once, at the leader when Leader knows it,
// else through the cluster's client. A lease that is gone is
// rpctypes.ErrLeaseNotFound, from whichever member answered.
func (l *Leader) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	if c, endpoint := l.leader(); c != nil {
		tctx, cancel := context.WithTimeout(ctx, leaderTry)
		resp, err := l.renewAt(tctx, endpoint, c, id)

		cancel()

		switch {
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			return resp, err
		case ctx.Err() != nil:
			// The caller gave up, not the leader: its stream is left to
			// the others.
			return nil, ctx.Err()
		}

		l.forget(endpoint)
	}

	return l.cluster.KeepAliveOnce(ctx, id)
}

// Endpoint is the client URL of the member Leader believes leads, "" while
// it does not know.
func (l *Leader) Endpoint() string {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.current
}

// Close closes the leaders' clients; the cluster's client is the caller's.
func (l *Leader) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.closed = true

	var errs []error

	for endpoint, c := range l.clients {
		l.dropStream(endpoint)
		errs = append(errs, c.Close())
		delete(l.clients, endpoint)
	}

	l.current = ""

	return errors.Join(errs...)
}

// leader returns the client of the member believed to lead, and its URL;
// nil while unknown. When the belief is due for a check, one check runs
// in the background and the callers go on with what is known meanwhile.
func (l *Leader) leader() (*clientv3.Client, string) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		return nil, ""
	}

	if !l.resolving && l.clock.Now().Sub(l.checked) >= LeaderRecheck {
		l.resolving = true

		go l.refresh()
	}

	return l.clients[l.current], l.current
}

// refresh asks which member leads and makes it the current one.
func (l *Leader) refresh() {
	endpoint, err := l.find()

	l.mu.Lock()
	defer l.mu.Unlock()

	l.resolving, l.checked = false, l.clock.Now()

	if err != nil {
		l.current = ""

		return
	}

	l.use(endpoint)
}

// use makes endpoint the current leader, dialling it unless a client of it
// is open; l.mu is held. Clients of members that no longer lead are closed
// once there are more than maxLeaderClients.
func (l *Leader) use(endpoint string) {
	if l.closed {
		return
	}

	if _, ok := l.clients[endpoint]; !ok {
		c, err := l.dial(endpoint)
		if err != nil {
			l.current = ""

			return
		}

		l.clients[endpoint] = c
	}

	l.current = endpoint

	for other, c := range l.clients {
		if len(l.clients) <= maxLeaderClients {
			break
		}

		if other != endpoint {
			l.dropStream(other)
			_ = c.Close()
			delete(l.clients, other)
		}
	}
}

// forget drops the belief that endpoint leads, after a call there failed,
// and its keep-alive stream: the next call asks again.
func (l *Leader) forget(endpoint string) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.dropStream(endpoint)

	if l.current == endpoint {
		l.current, l.checked = "", time.Time{}
	}
}

// find asks the cluster's members, in turn, which of them leads, and
// returns that member's first client URL.
func (l *Leader) find() (string, error) {
	var lead uint64

	for _, endpoint := range l.cluster.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), leaderTry)
		st, err := l.cluster.Status(ctx, endpoint)

		cancel()

		if err == nil && st.Leader != 0 {
			lead = st.Leader

			break
		}
	}

	if lead == 0 {
		return "", errors.New("etcdutil: no member names a leader")
	}

	ctx, cancel := context.WithTimeout(context.Background(), leaderTry)
	defer cancel()

	members, err := l.cluster.MemberList(ctx)
	if err != nil {
		return "", err
	}

	for _, m := range members.Members {
		if m.ID == lead && len(m.ClientURLs) > 0 {
			return m.ClientURLs[0], nil
		}
	}

	return "", fmt.Errorf("etcdutil: the leader %x has no client URL", lead)
}
