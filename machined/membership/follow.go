package membership

import (
	"container/heap"
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
//
// A heartbeat that writes its entry moves only its last-seen stamp, which
// no reader sees: the follower then changes that entry and its place in
// the order of age-outs, and nothing else, so that its cost per watch
// event does not grow with the list (with 5,000 members, rebuilding and
// sorting the list on every event took a control plane's machined 23 % of
// a core at 60 events a second). The list is rebuilt only when a reader
// would see a change (changed); the next age-out by stamp is the top of a
// heap of the live entries, ordered by the moment each goes stale.
type follower struct {
	s       *Store
	publish func([]*Member)
	retry   backoff.Backoff

	entries   map[string]*followed
	dues      dueHeap
	last      []*Member
	published bool

	// changed: since the last emit, an entry came or left, or changed as
	// a reader sees it, or one aged out by its stamp.
	changed bool
}

// followed is one entry and its place among the age-outs.
type followed struct {
	m *Member
	// at is when m goes stale by its stamp (staleAt).
	at time.Time
	// index is its place in the heap of dues, -1 once it aged out.
	index int
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
		f.changed = true

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

	f.reset()

	for k, m := range entries {
		f.set(k, m)
	}

	return rev, nil
}

// reset empties the entries: everything is to be published again.
func (f *follower) reset() {
	f.entries, f.dues, f.changed = map[string]*followed{}, nil, true
}

// apply changes the entries as one event says. A key that no longer
// parses is dropped, as read skips it; a new key beyond twice the bound is
// not taken (a read would refuse such a list).
func (f *follower) apply(ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	_, held := f.entries[k]

	var m *Member
	if ev.Type != clientv3.EventTypeDelete {
		m = decode(ev.Kv)
	}

	switch {
	case m == nil:
		f.drop(k)
	case held || len(f.entries) < 2*f.s.max:
		f.set(k, m)
	}
}

// set makes m the entry of k, marking a change a reader would see.
func (f *follower) set(k string, m *Member) {
	now := f.s.clock.Now()
	e, held := f.entries[k]

	if !held || Stale(e.m, now) != Stale(m, now) || !sameView(e.m, m) {
		f.changed = true
	}

	if !held {
		e = &followed{index: -1}
		f.entries[k] = e
	}

	e.m, e.at = m, staleAt(m)

	switch {
	case e.index >= 0:
		heap.Fix(&f.dues, e.index)
	case !Stale(m, now):
		heap.Push(&f.dues, e)
	}
}

// drop removes the entry of k, if any.
func (f *follower) drop(k string) {
	e, held := f.entries[k]
	if !held {
		return
	}

	delete(f.entries, k)

	if e.index >= 0 {
		heap.Remove(&f.dues, e.index)
	}

	f.changed = true
}

// emit calls publish with the live entries if a reader would see them
// differ from what it was last given.
func (f *follower) emit() {
	if f.published && !f.changed {
		return
	}

	f.changed = false
	now := f.s.clock.Now()
	live := make([]*Member, 0, len(f.entries))

	for _, e := range f.entries {
		if !Stale(e.m, now) {
			live = append(live, e.m)
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
// last-seen stamp, if any is live. Entries already stale leave the heap.
func (f *follower) untilAgeOut() (time.Duration, bool) {
	now := f.s.clock.Now()

	for len(f.dues) > 0 && f.dues[0].at.Before(now) {
		heap.Pop(&f.dues)
	}

	if len(f.dues) == 0 {
		return 0, false
	}

	// Stale is strict: the entry is stale just after its age-out.
	return f.dues[0].at.Sub(now) + time.Nanosecond, true
}

// dueHeap orders live entries by the moment each goes stale
// (container/heap).
type dueHeap []*followed

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }

func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *dueHeap) Push(x any) {
	e, _ := x.(*followed)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]

	return e
}

// staleAt is the moment m's last-seen stamp has aged it out: Stale holds
// just after it.
func staleAt(m *Member) time.Time {
	return m.GetLastSeen().AsTime().Add(StaleAfter(m.GetInterval().AsDuration()))
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
