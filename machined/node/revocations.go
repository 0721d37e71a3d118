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

// revocations is the node's revocation list, kept in the state directory
// so that a restarted node enforces it before it has reached anyone, and
// what keeps it current and hands it to apid and trustd.
type revocations struct {
	deps
	list *revocation.List
	etcd *etcdState // a control plane's, where the cluster's list lives
}

// followRevocations keeps the node's revocation list current for the
// boot and hands it to apid and trustd: a control plane follows etcd, a
// worker watches the control planes' trustd (it runs no etcd). Whatever the
// source, the list is kept in the state directory (revocations.list), and
// expired entries are pruned.
func (n *Node) followRevocations(ctx context.Context, b *bootState, bg *sync.WaitGroup) {
	r := &n.revoked

	// Published before the services start: apid's first resources already
	// hold the list the node kept.
	changed := r.publish()

	bg.Go(func() {
		for {
			select {
			case <-changed:
				changed = r.publish()
			case <-ctx.Done():
				return
			}
		}
	})
	bg.Go(func() { r.prune(ctx) })

	if b.cfg.Machine.Type.IsControlPlane() {
		bg.Go(func() { r.followEtcd(ctx) })

		return
	}

	trustd, err := n.startTrustdClient(ctx, b, bg)
	if err != nil {
		n.log.Error("revocation list not followed", slog.String(logkey.Error, err.Error()))

		return
	}

	w, err := revocation.NewWatcher(revocation.PollerConfig{Trustd: trustd, List: r.list, Clock: n.clock, Logger: n.log, Rand: n.cfg.Rand})
	if err != nil {
		n.log.Error("revocation list not followed", slog.String(logkey.Error, err.Error()))

		return
	}

	bg.Go(func() { w.Run(ctx) })
}

// publish puts the list into the resources apid and trustd read, and
// returns a channel closed at the list's next change.
func (r *revocations) publish() <-chan struct{} {
	changed := r.list.Changed()
	entries, rev := r.list.Entries(), r.list.Revision()

	r.store.Update(func(res *node.Resources) {
		res.RevokedRevision = rev
		res.Revoked = make([]*node.RevokedSerial, 0, len(entries))
		for _, e := range entries {
			res.Revoked = append(res.Revoked, &node.RevokedSerial{Serial: e.Serial, NotAfter: timestamppb.New(e.NotAfter)})
		}
	})

	return changed
}

// prune drops expired entries from the node's list and, on a control
// plane, from etcd.
func (r *revocations) prune(ctx context.Context) {
	for clock.Sleep(ctx, r.clock, revocation.PruneInterval) {
		if _, err := r.list.Prune(); err != nil {
			r.log.Warn("revocation list not pruned", slog.String(logkey.Error, err.Error()))
		}

		if store, err := r.etcdStore(); err == nil {
			if _, err := store.Prune(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("revocations in etcd not pruned", slog.String(logkey.Error, err.Error()))
			}
		}
	}
}

// followEtcd follows the list in etcd. The node's etcd exists
// once its boot has set it up, but its client certificate is issued only
// once the clock is synced: until then the client is asked for again every
// PollInterval.
func (r *revocations) followEtcd(ctx context.Context) {
	var store *revocation.Store

	for {
		var err error

		store, err = r.etcdStore()
		if errors.Is(err, revocation.ErrNoEtcd) {
			r.log.Info("revocation list not followed: no etcd on this node")

			return
		}

		if err == nil {
			break
		}

		r.log.Debug("revocation list: no etcd client yet", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, r.clock, revocation.PollInterval) {
			return
		}
	}

	store.Follow(ctx, func(entries []revocation.Entry, rev int64) {
		changed, err := r.list.ReplaceAt(entries, rev)

		switch {
		case err != nil:
			r.log.Error("revocation list not kept", slog.String(logkey.Error, err.Error()))
		case changed:
			r.log.Info("revocation list updated", slog.Int(logkey.Revoked, len(entries)))
		}
	})
}

// etcdStore is the list in the node's etcd, or revocation.ErrNoEtcd.
func (r *revocations) etcdStore() (*revocation.Store, error) {
	cli, err := r.etcd.client(revocation.ErrNoEtcd, revocation.ErrUnavailable)
	if err != nil {
		return nil, err
	}

	return revocation.NewStore(revocation.StoreConfig{Client: cli, Clock: r.clock, Logger: r.log})
}

// renewals records the renewals of client certificates in the cluster's
// etcd (certapi.Lineage); a node without it refuses to renew.
type renewals struct{ r *revocations }

// Record keeps l in etcd.
func (r renewals) Record(ctx context.Context, l revocation.Link) error {
	store, err := r.r.etcdStore()
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
func (r *revocations) isRevoked(serial string) bool {
	for _, e := range r.list.Entries() {
		if e.Serial == serial {
			return true
		}
	}

	return false
}
