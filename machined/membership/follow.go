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

// Change is what a reader sees of one member after a change: the entry
// under its address (its first, as it is keyed), or nil when it left or
// aged out.
type Change struct {
	Address string
	Member  *Member
}

// Follow calls publish with the live members, sorted by hostname, once
// read, and again after every change of what a reader sees of them; it is
// FollowChanges for readers that want the whole list each time, at a cost
// per change that grows with the list.
func (s *Store) Follow(ctx context.Context, publish func([]*Member)) {
	live := map[string]*Member{}

	s.FollowChanges(ctx, func(changes []Change) {
		for _, c := range changes {
			if c.Member == nil {
				delete(live, c.Address)
			} else {
				live[c.Address] = c.Member
			}
		}

		list := make([]*Member, 0, len(live))
		for _, m := range live {
			list = append(list, m)
		}

		slices.SortFunc(list, func(a, b *Member) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
		publish(list)
	})
}

// FollowChanges calls publish with the live members once read, and then
// with the members whose view changed (hostname, addresses, role,
// version, accepted CAs, time sync; not the last-seen stamp every
// heartbeat moves), as each change happens, until ctx ends: applied in
// order, the changes keep a copy of the list the same as etcd's, each
// costing its reader only the members it names. The first call comes once
// the list was read, with no changes if it is empty. It reads the list
// once, then watches etcd from the revision after that read, so a change
// reaches publish as etcd commits it, at no cost while nothing changes. An
// entry that ages out leaves by its lease; one whose last-seen stamp ages
// it out first leaves at that moment too.
//
// When etcd cannot be read, or the watch ends or was compacted, it reads
// the list again and watches anew, after a backoff on failures; publish is
// not called meanwhile and its caller keeps the list it has. After a read
// again, publish is given what differs from what it was given before,
// members gone meanwhile included. A failure is logged as a warning once,
// and at debug level while it lasts.
//
// publish runs on FollowChanges's goroutine and must not keep the changes'
// entries for change: they are shared with later calls.
func (s *Store) FollowChanges(ctx context.Context, publish func([]Change)) {
	f := &follower{
		s: s, publish: publish, shown: map[string]*Member{}, dirty: map[string]struct{}{},
		retry: backoff.Backoff{Min: RetryInterval, Max: followRetryMax, Rand: s.rand},
	}

	failing := false

	for ctx.Err() == nil {
		err := f.follow(ctx)
		s.copy.stop(f)

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

// follower is the state of one FollowChanges: the entries by key as of
// the last watch response, and what publish was given.
//
// Its cost per watch event does not grow with the list. A heartbeat that
// writes its entry moves only its last-seen stamp, which no reader sees:
// the follower then changes that entry and its place in the order of
// age-outs, and nothing else. A change a reader sees is published as that
// member alone (with 5,000 members, rebuilding and sorting the list on
// every event took a control plane's machined 23 % of a core at 60 events
// a second, and handing the whole list on to apid as much again). The next
// age-out by stamp is the top of a heap of the live entries, ordered by
// the moment each goes stale.
type follower struct {
	s       *Store
	publish func([]Change)
	retry   backoff.Backoff

	entries map[string]*followed
	dues    dueHeap

	// shown is what publish was given, by key: the live entries as a
	// reader sees them.
	shown     map[string]*Member
	published bool
	// dirty are the keys touched since the last emit: set, dropped or
	// aged out by their stamp.
	dirty map[string]struct{}
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

	wctx, cancel := context.WithCancel(watchContext(ctx))
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
		return nil // emit takes the entries aged out
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
		case resp.IsProgressNotify():
			// Every change up to the header's revision was sent.
			f.s.copy.advance(f, resp.Header.GetRevision())

			return nil
		}

		for _, ev := range resp.Events {
			f.apply(ev)
		}

		if n := len(resp.Events); n > 0 {
			f.s.copy.advance(f, resp.Events[n-1].Kv.ModRevision)
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

	f.s.copy.load(f, f.s.cli, entries, rev)

	return rev, nil
}

// reset empties the entries before a read: each member shown is looked at
// again by the next emit, so that those gone meanwhile leave.
func (f *follower) reset() {
	f.entries, f.dues = map[string]*followed{}, nil

	for k := range f.shown {
		f.dirty[k] = struct{}{}
	}
}

// apply changes the entries, and the copy, as one event says. A key that
// no longer parses is dropped, as read skips it; a new key beyond twice
// the bound is not taken (a read would refuse such a list).
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
	default:
		// The copy would miss an entry; List reads etcd, which refuses
		// such a list, until the next read of it.
		f.s.copy.stop(f)

		return
	}

	f.s.copy.apply(f, k, m)
}

// set makes m the entry of k.
func (f *follower) set(k string, m *Member) {
	now := f.s.clock.Now()
	e, held := f.entries[k]
	f.dirty[k] = struct{}{}

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

	f.dirty[k] = struct{}{}
}

// emit calls publish with the members a reader would now see differ from
// what it was given, if any (and once after the first read in any case):
// those of the keys touched since the last emit, and those aged out by
// their stamp.
func (f *follower) emit() {
	now := f.s.clock.Now()

	for len(f.dues) > 0 && f.dues[0].at.Before(now) {
		e, _ := heap.Pop(&f.dues).(*followed)
		f.dirty[key(e.m)] = struct{}{}
	}

	var changes []Change

	for k := range f.dirty {
		var live *Member
		if e, ok := f.entries[k]; ok && !Stale(e.m, now) {
			live = e.m
		}

		shown, ok := f.shown[k]

		switch {
		case live != nil && (!ok || !sameView(shown, live)):
			f.shown[k] = live
		case live == nil && ok:
			delete(f.shown, k)
		default:
			continue
		}

		changes = append(changes, Change{Address: strings.TrimPrefix(k, prefix), Member: live})
	}

	clear(f.dirty)

	if f.published && len(changes) == 0 {
		return
	}

	f.published = true
	f.publish(changes)
}

// untilAgeOut is how long until the first live entry goes stale by its
// last-seen stamp, if any is live: none if it already is (emit takes it).
func (f *follower) untilAgeOut() (time.Duration, bool) {
	if len(f.dues) == 0 {
		return 0, false
	}

	// Stale is strict: the entry is stale just after its age-out.
	return max(f.dues[0].at.Sub(f.s.clock.Now())+time.Nanosecond, 0), true
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
