package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// startMembership keeps the node's entry in the cluster's member list
// fresh until the boot ends: a control plane writes it into etcd itself
// and follows the list there for apid's routing and the resource API; a
// worker sends it to a control plane's trustd with its node certificate.
// It returns once a worker's first heartbeat was answered, or after
// firstHeartbeatWait, whichever comes first (a control plane: at once).
func (n *Node) startMembership(ctx context.Context, b *bootState, bg *sync.WaitGroup) {
	var beat func(context.Context) error

	first := make(chan struct{})
	answered := sync.OnceFunc(func() { close(first) })

	if b.cfg.Machine.Type.IsControlPlane() {
		beat = n.controlPlaneBeat(b)

		bg.Go(func() { n.followMembers(ctx) })
		answered()
	} else {
		beat = n.workerBeat(b)
	}

	bg.Go(func() {
		membership.Until(ctx, n.clock, n.cfg.HeartbeatInterval, n.log, func(ctx context.Context) error {
			defer answered()

			return n.beats.unlessLeaving(ctx, beat)
		})
	})

	t := n.clock.NewTimer(firstHeartbeatWait)
	defer t.Stop()

	select {
	case <-first:
	case <-t.C():
	case <-ctx.Done():
	}
}

// firstHeartbeatWait bounds how long a worker's boot waits for the answer
// to its first heartbeat. apid routes only to listed members, so a worker
// that said it was ready before it was listed would be refused to callers
// for a moment; a control plane that cannot record the entry (its etcd not
// bootstrapped yet answers at once; one without quorum only after its own
// timeout) must not hold the boot for longer than this.
const firstHeartbeatWait = 5 * time.Second

// heartbeatGate orders the membership heartbeats and a reset's leaving:
// once leaving is set, no heartbeat writes the node's entry again.
type heartbeatGate struct {
	mu      sync.Mutex
	leaving bool
}

// unlessLeaving sends a heartbeat, unless a reset takes the node out of
// the cluster, so that none writes its entry back after it was removed.
func (g *heartbeatGate) unlessLeaving(ctx context.Context, beat func(context.Context) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()

	if g.leaving {
		return nil
	}

	return beat(ctx)
}

// setLeaving stops the heartbeats (a reset leaves) or lets them go on (it
// was abandoned); it waits for a heartbeat under way.
func (g *heartbeatGate) setLeaving(leaving bool) {
	g.mu.Lock()
	g.leaving = leaving
	g.mu.Unlock()
}

// ownEntry is the node's entry as of now.
func (n *Node) ownEntry(b *bootState) *membership.Member {
	res, _ := n.store.Current()

	var digest string
	if set, err := ca.ParseAcceptedSet(res.GetAcceptedCas(), n.clock.Now()); err == nil {
		digest = membership.CADigest(set)
	}

	return &membership.Member{
		Hostname: b.hostname, Addresses: canonicalAddresses(b.addresses), Version: version.Tag,
		Interval: durationpb.New(n.cfg.HeartbeatInterval), TimeSynced: b.time.Synced(), AcceptedCas: digest,
	}
}

func (n *Node) controlPlaneBeat(b *bootState) func(context.Context) error {
	return func(ctx context.Context) error {
		store, err := n.memberStore()
		if err != nil {
			return err
		}

		return store.Put(ctx, n.ownEntry(b), membership.RoleControlPlane)
	}
}

// followMembers publishes the member list each time it changes in the
// node's etcd, from the moment the node has an etcd client (its etcd is
// set up and its clock synced) until ctx ends: a worker whose entry any
// control plane records is routed to as soon as etcd commits it, and all
// control planes show the same list.
func (n *Node) followMembers(ctx context.Context) {
	var store *membership.Store

	for {
		var err error

		if store, err = n.memberStore(); err == nil {
			break
		}

		n.log.Debug("member list: no etcd client yet", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, n.clock, membership.RetryInterval) {
			return
		}
	}

	store.Follow(ctx, n.publishMembers)
}

// publishMembers gives apid the members' names and the resource API the
// member list. Each hostname routes to the member's first address, with
// the role its entry proves; an unchanged list changes nothing
// (Store.Update).
func (n *Node) publishMembers(members []*membership.Member) {
	infos := make([]resourceapi.MemberInfo, 0, len(members))
	names := make([]*node.MemberName, 0, len(members))

	for _, m := range members {
		infos = append(infos, resourceapi.MemberInfo{
			Hostname: m.GetHostname(), Addresses: m.GetAddresses(),
			ControlPlane: m.GetRole() == membership.RoleControlPlane, Version: m.GetVersion(),
		})
		names = append(names, &node.MemberName{Hostname: m.GetHostname(), Address: m.GetAddresses()[0], Role: m.GetRole()})
	}

	n.store.Update(func(r *node.Resources) { r.Members = names })
	n.resourceErr("members", n.res.SetMembers(infos))
}

// workerBeat sends the worker's entry; a refusal for want of the node's
// name in its certificate (one from a control plane of the previous
// version) makes it renew the certificate.
func (n *Node) workerBeat(b *bootState) func(context.Context) error {
	sender := n.workerSender(b)

	return func(ctx context.Context) error {
		err := sender.Send(ctx, n.ownEntry(b))
		b.certs.renewForName(ctx, err)

		return err
	}
}

// workerSender reaches the control planes' trustd with the worker's node
// certificate, for its heartbeats and its leaving, through the client its
// revocation poller uses.
func (n *Node) workerSender(b *bootState) membership.Sender {
	tc := n.config.trustd(b)
	if tc == nil {
		return membership.Sender{} // its calls say why
	}

	return membership.Sender{Trustd: tc}
}

// serverCertificate is the node's current server certificate, which a
// worker presents with its heartbeats.
func (n *Node) serverCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	res, _ := n.store.Current()
	if res.GetServer() == nil {
		return nil, errors.New("node: no server certificate yet")
	}

	c, err := tls.X509KeyPair(res.GetServer().GetCrt(), res.GetServer().GetKey())

	return &c, err
}

// acceptedCAs are the CAs the node accepts now (after a worker's join,
// those trustd added).
func (n *Node) acceptedCAs() *ca.AcceptedSet {
	res, _ := n.store.Current()

	set, err := ca.ParseAcceptedSet(res.GetAcceptedCas(), n.clock.Now())
	if err != nil {
		return n.config.current().AcceptedCAs()
	}

	return set
}

// memberStore is the member list in the local etcd: a control plane's.
func (n *Node) memberStore() (*membership.Store, error) {
	cli, err := n.etcdClient(errNoEtcd, membership.ErrUnavailable)
	if err != nil {
		return nil, err
	}

	return membership.New(membership.Config{Client: cli, Clock: n.clock, Logger: n.log})
}

var errNoEtcd = fmt.Errorf("%w: etcd is not set up on this node", membership.ErrUnavailable)

// Members is the cluster's member list as this node reads it: from its
// etcd on a control plane; a worker has none.
func (n *Node) Members() membership.Reader {
	return memberReader{n}
}

type memberReader struct{ n *Node }

func (r memberReader) List(ctx context.Context) ([]*membership.Member, error) {
	store, err := r.n.memberStore()
	if err != nil {
		return nil, err
	}

	return store.List(ctx)
}

// canonicalAddresses keeps the addresses netip prints back the same way,
// as membership entries need them.
func canonicalAddresses(addrs []string) []string {
	var out []string

	for _, a := range addrs {
		if p, err := netip.ParseAddr(a); err == nil {
			out = append(out, p.Unmap().String())
		}
	}

	return out
}
