package namestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/trustd"
)

// FollowHolders calls know with the addresses of every live binding: those
// read at first, then those of each binding as etcd commits it, until ctx
// ends; after a failure (etcd not formed yet, a watch that ended or was
// compacted) it reads again, after a backoff. An address may be given more
// than once. Every binding was written by a trustd of the cluster before
// it returned a node certificate naming those addresses, so trustd makes
// them known sources (trustd.Server.Know): a node is known at every
// control plane from the moment any of them signed for it, before its
// first heartbeat lists it as a member.
func (s *Store) FollowHolders(ctx context.Context, log *slog.Logger, know func(netip.Addr)) {
	log = defaults.Logger(log)
	retry := backoff.Backoff{Min: followRetryMin, Max: followRetryMax}
	failing := false

	for ctx.Err() == nil {
		err := s.followHolders(ctx, know, retry.Reset)
		if ctx.Err() != nil {
			return
		}

		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}

		failing = true
		log.Log(ctx, level, "following the name bindings in etcd", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, s.cfg.Clock, retry.Next()) {
			return
		}
	}
}

// followHolders reads every binding, then watches from the revision after
// that read until the watch fails; read is called once the read succeeded.
// Meanwhile s.followed holds the bindings, for Ensure.
func (s *Store) followHolders(ctx context.Context, know func(netip.Addr), read func()) error {
	// The bindings read go into names, then those the watch brings into
	// s.followed, which holds names from then on.
	names := map[string]*binding{}
	keep := func(name string, b *binding) { names[name] = b }
	each := func(kv *mvccpb.KeyValue) {
		name := strings.TrimPrefix(string(kv.Key), s.cfg.Prefix)

		// A binding that does not parse answers no heartbeat: Ensure
		// reads it, and says so.
		b := &binding{}
		if json.Unmarshal(kv.Value, b) != nil {
			b = nil
		}

		keep(name, b)

		if b == nil || !s.cfg.Clock.Now().Before(b.NotAfter) {
			return
		}

		for _, a := range b.Addresses {
			know(a)
		}
	}

	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	rev, err := etcdutil.Scan(rctx, s.cfg.Client, s.cfg.Prefix, holdersPage, maxHolders, each)

	cancel()

	if err != nil {
		return err
	}

	read()

	s.followed.start(names)
	defer s.followed.stop()

	keep = s.followed.put

	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer stop()

	for resp := range s.cfg.Client.Watch(wctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		switch {
		case resp.CompactRevision != 0:
			return fmt.Errorf("namestore: watched revision compacted at %d", resp.CompactRevision)
		case resp.Err() != nil:
			return resp.Err()
		}

		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				each(ev.Kv)
			} else {
				s.followed.forget(strings.TrimPrefix(string(ev.Kv.Key), s.cfg.Prefix))
			}
		}
	}

	if ctx.Err() != nil {
		return ctx.Err()
	}

	return errors.New("namestore: watch of the name bindings ended")
}

// followed is what followHolders saw of the bindings, by name: while its
// watch runs, it is etcd's record a moment behind, as a serializable read
// is, and Ensure answers from it. Each binding is some 100 bytes: 1 MiB
// for the 10,000 nodes of a large cluster.
type followed struct {
	mu    sync.RWMutex
	names map[string]*binding // nil while no watch runs
}

// start makes names, read at the watch's start revision, the bindings
// followed; each put the watch brings then goes into the same map.
func (f *followed) start(names map[string]*binding) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.names = names
}

// stop ends the following: Ensure reads etcd again.
func (f *followed) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.names = nil
}

// put records name's binding as the watch brought it.
func (f *followed) put(name string, b *binding) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.names != nil {
		f.names[name] = b
	}
}

// forget drops name's binding, deleted or ended in etcd.
func (f *followed) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()

	delete(f.names, name)
}

// covers reports whether a binding followed covers b (binding.covers);
// false while nothing is followed.
func (f *followed) covers(b trustd.Binding) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()

	return f.names[b.Name].covers(b)
}
