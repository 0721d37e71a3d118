package node

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/revocation"
)

// followRevocations keeps the node's revocation list current for the
// boot and hands it to apid and trustd: a control plane follows etcd, a
// worker polls the control planes' trustd (it runs no etcd). Whatever the
// source, the list is kept in the state directory (n.revoked), so a
// restarted node enforces it before it has reached anyone, and expired
// entries are pruned.
func (n *Node) followRevocations(ctx context.Context, b *bootState, bg *sync.WaitGroup) {
	// Published before the services start: apid's first resources already
	// hold the list the node kept.
	changed := n.publishRevocations()

	bg.Go(func() {
		for {
			select {
			case <-changed:
				changed = n.publishRevocations()
			case <-ctx.Done():
				return
			}
		}
	})
	bg.Go(func() { n.pruneRevocations(ctx) })

	if b.cfg.Machine.Type.IsControlPlane() {
		bg.Go(func() { n.followEtcdRevocations(ctx) })

		return
	}

	trustd, err := n.startTrustdClient(ctx, b, bg)
	if err != nil {
		n.log.Error("revocation list not followed", slog.String(logkey.Error, err.Error()))

		return
	}

	p, err := revocation.NewPoller(revocation.PollerConfig{Trustd: trustd, List: n.revoked, Clock: n.clock, Logger: n.log})
	if err != nil {
		n.log.Error("revocation list not followed", slog.String(logkey.Error, err.Error()))

		return
	}

	bg.Go(func() { p.Run(ctx) })
}

// publishRevocations puts the list into the resources apid and trustd
// read, and returns a channel closed at the list's next change.
func (n *Node) publishRevocations() <-chan struct{} {
	changed := n.revoked.Changed()
	entries := n.revoked.Entries()

	n.store.Update(func(r *node.Resources) {
		r.Revoked = make([]*node.RevokedSerial, 0, len(entries))
		for _, e := range entries {
			r.Revoked = append(r.Revoked, &node.RevokedSerial{Serial: e.Serial, NotAfter: timestamppb.New(e.NotAfter)})
		}
	})

	return changed
}

// pruneRevocations drops expired entries from the node's list and, on a
// control plane, from etcd.
func (n *Node) pruneRevocations(ctx context.Context) {
	for clock.Sleep(ctx, n.clock, revocation.PruneInterval) {
		if _, err := n.revoked.Prune(); err != nil {
			n.log.Warn("revocation list not pruned", slog.String(logkey.Error, err.Error()))
		}

		if store, err := n.revocationStore(); err == nil {
			if _, err := store.Prune(ctx); err != nil && ctx.Err() == nil {
				n.log.Debug("revocations in etcd not pruned", slog.String(logkey.Error, err.Error()))
			}
		}
	}
}

// followEtcdRevocations follows the list in etcd. The node's etcd exists
// once its boot has set it up, but its client certificate is issued only
// once the clock is synced: until then the client is asked for again every
// PollInterval.
func (n *Node) followEtcdRevocations(ctx context.Context) {
	var store *revocation.Store

	for {
		var err error

		store, err = n.revocationStore()
		if errors.Is(err, revocation.ErrNoEtcd) {
			n.log.Info("revocation list not followed: no etcd on this node")

			return
		}

		if err == nil {
			break
		}

		n.log.Debug("revocation list: no etcd client yet", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, n.clock, revocation.PollInterval) {
			return
		}
	}

	store.Follow(ctx, func(entries []revocation.Entry) {
		changed, err := n.revoked.Replace(entries)

		switch {
		case err != nil:
			n.log.Error("revocation list not kept", slog.String(logkey.Error, err.Error()))
		case changed:
			n.log.Info("revocation list updated", slog.Int(logkey.Revoked, len(entries)))
		}
	})
}

// revocationStore is the list in the node's etcd, or revocation.ErrNoEtcd.
func (n *Node) revocationStore() (*revocation.Store, error) {
	cli, err := n.etcd.client(revocation.ErrNoEtcd, revocation.ErrUnavailable)
	if err != nil {
		return nil, err
	}

	return revocation.NewStore(revocation.StoreConfig{Client: cli, Clock: n.clock, Logger: n.log})
}

// renewals records the renewals of client certificates in the cluster's
// etcd (certapi.Lineage); a node without it refuses to renew.
type renewals struct{ n *Node }

// Record keeps l in etcd.
func (r renewals) Record(ctx context.Context, l revocation.Link) error {
	store, err := r.n.revocationStore()
	if err != nil {
		return err
	}

	return store.Record(ctx, l)
}

// listenSource is the address a worker calls from: its listen address when
// it has one, as for its join.
func listenSource(b *bootState) string {
	if a, err := netip.ParseAddr(b.cfg.Machine.ListenAddress); err == nil && !a.IsUnspecified() {
		return a.String()
	}

	return ""
}

// isRevoked reports whether the node's list holds serial.
func (n *Node) isRevoked(serial string) bool {
	for _, e := range n.revoked.Entries() {
		if e.Serial == serial {
			return true
		}
	}

	return false
}
