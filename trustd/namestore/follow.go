package namestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/logkey"
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
func (s *Store) followHolders(ctx context.Context, know func(netip.Addr), read func()) error {
	each := func(kv *mvccpb.KeyValue) {
		var b binding
		if json.Unmarshal(kv.Value, &b) != nil || !s.cfg.Clock.Now().Before(b.NotAfter) {
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
			}
		}
	}

	if ctx.Err() != nil {
		return ctx.Err()
	}

	return errors.New("namestore: watch of the name bindings ended")
}
