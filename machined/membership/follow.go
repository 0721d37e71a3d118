package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

var (
	// errCompacted: the watch's start revision was compacted away; the
	// list is read again at once, since etcd itself is fine.
	errCompacted = errors.New("membership: watched revision compacted")
	// errWatchEnded: the watch closed without saying why (the client was
	// closed, or etcd went away).
	errWatchEnded = errors.New("membership: etcd watch ended")
)

// Follow calls publish with the live members, sorted by hostname, once
// read, and again after every change of what a reader sees of them
// (hostname, addresses, role, version, accepted CAs, time sync; not the
// last-seen stamp every heartbeat moves), until ctx ends. It reads the
// list once, then watches etcd from the revision after that read, so a
// change reaches publish as etcd commits it, at no cost while nothing
// changes. An entry that ages out leaves by its lease; one whose
// last-seen stamp ages it out first leaves at that moment too.
//
// When etcd cannot be read, or the watch ends or was compacted, it reads
// the list again and watches anew, after a backoff on failures; publish is
// not called meanwhile and its caller keeps the list it has. A failure is
// logged as a warning once, and at debug level while it lasts.
//
// publish runs on Follow's goroutine and must not keep the slice's
// entries for change: they are shared with later calls.
func (s *Store) Follow(ctx context.Context, publish func([]*Member)) {
	f := &follower{
		s: s, publish: publish,
		retry: backoff.Backoff{Min: RetryInterval, Max: followRetryMax, Rand: s.rand},
	}

	failing := false

	for ctx.Err() == nil {
		err := f.follow(ctx)

		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errCompacted):
			continue
		}

		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}

		failing = true
		s.log.Log(ctx, level, "following the member list in etcd", slog.String(logkey.Error, err.Error()))

		if !clock.Sleep(ctx, s.clock, f.retry.Next()) {
			return
		}
	}
}

// follower is the state of one Follow: the entries by key as of the last
// watch response, and what publish was last given.
type follower struct {
	s       *Store
	publish func([]*Member)
	retry   backoff.Backoff

	entries   map[string]*Member
	last      []*Member
	published bool
}

// follow reads the list and watches it until the watch fails.
func (f *follower) follow(ctx context.Context) error {
	rev, err := f.load(ctx)
	if err != nil {
		return err
	}

	if f.s.afterLoad != nil {
		f.s.afterLoad()
	}

	f.retry.Reset()
	f.emit()

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()

	watch := f.s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))

	for {
		if err := f.next(ctx, watch); err != nil {
			return err
		}

		f.emit()
	}
}

// next waits for the next watch response and applies it, or for the
// moment the first live entry ages out by its stamp.
func (f *follower) next(ctx context.Context, watch clientv3.WatchChan) error {
	var ageOut <-chan time.Time

	if d, ok := f.untilAgeOut(); ok {
		t := f.s.clock.NewTimer(d)
		defer t.Stop()

		ageOut = t.C()
	}

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ageOut:
		return nil
	case resp, ok := <-watch:
		switch {
		case !ok:
			return errWatchEnded
		case resp.CompactRevision != 0:
			return fmt.Errorf("%w: revision %d", errCompacted, resp.CompactRevision)
		case resp.Err() != nil:
			return fmt.Errorf("%w: %w", ErrUnavailable, resp.Err())
		case resp.Canceled:
			return errWatchEnded
		}

		for _, ev := range resp.Events {
			f.apply(ev)
		}

		return nil
	}
}

// load reads every entry and the revision of the read.
func (f *follower) load(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	entries := map[string]*Member{}

	rev, err := f.s.scan(ctx, func(kv *mvccpb.KeyValue) {
		if m := decode(kv); m != nil {
			entries[string(kv.Key)] = m
		}
	})
	if err != nil {
		return 0, err
	}

	f.entries = entries

	return rev, nil
}

// apply changes the entries as one event says. A key that no longer
// parses is dropped, as read skips it; a new key beyond twice the bound is
// not taken (a read would refuse such a list).
func (f *follower) apply(ev *clientv3.Event) {
	k := string(ev.Kv.Key)

	if ev.Type == clientv3.EventTypeDelete {
		delete(f.entries, k)

		return
	}

	m := decode(ev.Kv)

	switch _, held := f.entries[k]; {
	case m == nil:
		delete(f.entries, k)
	case held || len(f.entries) < 2*f.s.max:
		f.entries[k] = m
	}
}

// emit calls publish with the live entries if a reader would see them
// differ from what it was last given.
func (f *follower) emit() {
	now := f.s.clock.Now()
	live := make([]*Member, 0, len(f.entries))

	for _, m := range f.entries {
		if !Stale(m, now) {
			live = append(live, m)
		}
	}

	slices.SortFunc(live, func(a, b *Member) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })

	if f.published && slices.EqualFunc(live, f.last, sameView) {
		return
	}

	f.last, f.published = live, true
	f.publish(live)
}

// untilAgeOut is how long until the first live entry goes stale by its
// last-seen stamp, if any is live.
func (f *follower) untilAgeOut() (time.Duration, bool) {
	now := f.s.clock.Now()
	first, ok := time.Duration(0), false

	for _, m := range f.entries {
		if Stale(m, now) {
			continue
		}

		// Stale is strict: the entry is stale just after its age-out.
		d := m.GetLastSeen().AsTime().Add(StaleAfter(m.GetInterval().AsDuration())).Sub(now) + time.Nanosecond
		if !ok || d < first {
			first, ok = d, true
		}
	}

	return first, ok
}

// sameView reports whether a reader sees a and b as the same member: all
// but the last-seen stamp and the interval.
func sameView(a, b *Member) bool {
	return a.GetHostname() == b.GetHostname() && slices.Equal(a.GetAddresses(), b.GetAddresses()) &&
		a.GetRole() == b.GetRole() && a.GetVersion() == b.GetVersion() &&
		a.GetAcceptedCas() == b.GetAcceptedCas() && a.GetTimeSynced() == b.GetTimeSynced()
}

// decode parses and checks one stored entry; nil if it does not parse, does
// not check or is not under its own key. Only Put writes here, so such an
// entry is damage, not a member.
func decode(kv *mvccpb.KeyValue) *Member {
	m := &Member{}
	if proto.Unmarshal(kv.Value, m) != nil || Check(m) != nil || string(kv.Key) != key(m) {
		return nil
	}

	return m
}
