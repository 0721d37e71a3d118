package node

import (
	"context"
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

// heartbeats keep the node's entry in the cluster's member list fresh
// and, on a control plane, follow the list: each boot starts them (start),
// and a reset's leaving stops them for good.
type heartbeats struct {
	deps
	interval time.Duration // Config.HeartbeatInterval
	etcd     *etcdState    // a control plane's, where the list lives
	config   *configState  // a worker's boot's client of trustd
	// list is the member list as a control plane follows it, which
	// `get members` is answered from.
	list *membership.Copy
	// mu orders the heartbeats and a reset's leaving: once leaving is
	// set, no heartbeat writes the node's entry again.
	mu      sync.Mutex
	leaving bool
}

// start keeps the node's entry in the cluster's member list fresh until
// the boot ends: a control plane writes it into etcd itself and follows
// the list there for apid's routing and the resource API; a worker sends
// it to a control plane's trustd with its node certificate. It returns
// once a worker's heartbeat was answered (a refused one is tried again
// after a second), or after firstHeartbeatWait, whichever comes first (a
// control plane: at once).
func (h *heartbeats) start(ctx context.Context, b *bootState, bg *sync.WaitGroup) {
	var beat func(context.Context) error

	first := make(chan struct{})
	answered := sync.OnceFunc(func() { close(first) })

	if b.cfg.Machine.Type.IsControlPlane() {
		beat = h.controlPlaneBeat(b)

		bg.Go(func() { h.followMembers(ctx) })
		answered()
	} else {
		beat = h.workerBeat(b)
	}

	bg.Go(func() {
		membership.Until(ctx, h.clock, h.interval, h.log, func(ctx context.Context) error {
			err := h.unlessLeaving(ctx, beat)
			if err == nil {
				answered()
			}

			return err
		})
	})

	t := h.clock.NewTimer(firstHeartbeatWait)
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

// unlessLeaving sends a heartbeat, unless a reset takes the node out of
// the cluster, so that none writes its entry back after it was removed.
func (h *heartbeats) unlessLeaving(ctx context.Context, beat func(context.Context) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()

	if h.leaving {
		return nil
	}

	return beat(ctx)
}

// setLeaving stops the heartbeats (a reset leaves) or lets them go on (it
// was abandoned); it waits for a heartbeat under way.
func (h *heartbeats) setLeaving(leaving bool) {
	h.mu.Lock()
	h.leaving = leaving
	h.mu.Unlock()
}

// ownEntry is the node's entry as of now.
func (h *heartbeats) ownEntry(b *bootState) *membership.Member {
	res, _ := h.store.Current()

	var digest string
	if set, err := ca.ParseAcceptedSet(res.GetAcceptedCas(), h.clock.Now()); err == nil {
		digest = membership.CADigest(set)
	}

	return &membership.Member{
		Hostname: b.hostname, Addresses: canonicalAddresses(b.addresses), Version: version.Get().Tag,
		Interval: durationpb.New(h.interval), TimeSynced: b.time.Synced(), AcceptedCas: digest,
	}
}

func (h *heartbeats) controlPlaneBeat(b *bootState) func(context.Context) error {
	return func(ctx context.Context) error {
		store, err := h.memberStore()
		if err != nil {
			return err
		}

		return store.Put(ctx, h.ownEntry(b), membership.RoleControlPlane)
	}
}

// followMembers publishes the member list each time it changes in the
// node's etcd, from the moment the node has an etcd client (its etcd is
// set up and its clock synced) until ctx ends: a worker whose entry any
// control plane records is routed to as soon as etcd commits it, and all
// control planes show the same list.
func (h *heartbeats) followMembers(ctx context.Context) {
	var store *membership.Store

	for {
		var err error

		if store, err = h.memberStore(); err == nil {
			break
		}

		h.log.Debug("member list: no etcd client yet", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, h.clock, membership.RetryInterval) {
			return
		}
	}

	store.FollowChanges(ctx, h.publishMembers)
}

// publishMembers gives apid the names of the members that came, changed
// or left, and the resource API those members: each costs them that
// member alone, whatever the size of the list. Each hostname routes to
// the member's first address, with the role its entry proves.
func (h *heartbeats) publishMembers(changes []membership.Change) {
	var (
		infos   []resourceapi.MemberInfo
		names   []*node.MemberName
		removed []string
	)

	for _, c := range changes {
		m := c.Member
		if m == nil {
			removed = append(removed, c.Address)

			continue
		}

		infos = append(infos, resourceapi.MemberInfo{
			Hostname: m.GetHostname(), Addresses: m.GetAddresses(),
			ControlPlane: m.GetRole() == membership.RoleControlPlane, Version: m.GetVersion(),
		})
		names = append(names, &node.MemberName{Hostname: m.GetHostname(), Address: c.Address, Role: m.GetRole()})
	}

	h.members.Apply(names, removed)
	h.resourceErr("members", h.res.ApplyMembers(infos, removed))
}

// workerBeat sends the worker's entry; a refusal for want of the node's
// name in its certificate (one from a control plane of the previous
// version) makes it renew the certificate.
func (h *heartbeats) workerBeat(b *bootState) func(context.Context) error {
	sender := h.workerSender(b)

	return func(ctx context.Context) error {
		err := sender.Send(ctx, h.ownEntry(b))
		b.certs.renewForName(ctx, err)

		return err
	}
}

// workerSender reaches the control planes' trustd with the worker's node
// certificate, for its heartbeats and its leaving, through the client its
// revocation poller uses.
func (h *heartbeats) workerSender(b *bootState) *membership.Sender {
	tc := h.config.trustd(b)
	if tc == nil {
		return &membership.Sender{} // its calls say why
	}

	return &membership.Sender{Trustd: tc, Clock: h.clock}
}

// removeOwnEntry deletes the node's own member entry: a control plane's
// through its etcd, a worker's through a control plane's trustd, as its
// heartbeats go.
func (h *heartbeats) removeOwnEntry(ctx context.Context, b *bootState) error {
	addrs := canonicalAddresses(b.addresses)
	if len(addrs) == 0 {
		return errors.New("node: no address to leave the member list with")
	}

	if !b.cfg.Machine.Type.IsControlPlane() {
		return h.workerSender(b).Leave(ctx, addrs[0])
	}

	store, err := h.memberStore()
	if err != nil {
		return err
	}

	return store.Delete(ctx, addrs[0], membership.RoleControlPlane)
}

// memberStore is the member list in the local etcd: a control plane's.
func (h *heartbeats) memberStore() (*membership.Store, error) {
	cli, err := h.etcd.client(errNoEtcd, membership.ErrUnavailable)
	if err != nil {
		return nil, err
	}

	return membership.New(membership.Config{Client: cli, Clock: h.clock, Logger: h.log, Copy: h.list})
}

var errNoEtcd = fmt.Errorf("%w: etcd is not set up on this node", membership.ErrUnavailable)

// Members is the cluster's member list as this node reads it: from its
// etcd on a control plane; a worker has none.
func (n *Node) Members() membership.Reader {
	return memberReader{&n.beats}
}

type memberReader struct{ h *heartbeats }

func (r memberReader) List(ctx context.Context) ([]*membership.Member, error) {
	store, err := r.h.memberStore()
	if err != nil {
		return nil, err
	}

	return store.List(ctx)
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
