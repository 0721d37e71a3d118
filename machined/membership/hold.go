package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

// A trustd holds the entries of the workers whose heartbeats came on a
// connection that stays open: the connection a worker keeps for its
// revocation watch says it is there, at no cost per worker, where a
// heartbeat every interval cost a call, a keep-alive and, every
// LastSeenRefresh, a write. The entries are written under one lease of
// the Store's own, its session, kept alive by one stream whatever the
// number of entries; each is marked held, with HeldInterval as its
// interval, and its last_seen written again only every
// LastSeenRefresh(HeldInterval), so that readers of any version age it out
// no sooner.
//
// A hold ends, and its entry is deleted unless something else wrote it
// since, when its deadline passes: the grace of an interval's age-out after
// the connection closed, HoldFor (and the same grace) after the last
// heartbeat, or the certificate's expiry, whichever comes first. A worker
// that moved to another control plane within the grace is written there
// under that one's session, and the delete here finds the entry changed.
// A trustd that stops or dies leaves its entries to its session's TTL,
// within which its workers move on.

// HoldTerms are what a heartbeat's hold depends on.
type HoldTerms struct {
	// Closing is done once the connection the heartbeat came on is
	// closed. Required.
	Closing context.Context
	// NotAfter is the expiry of the certificate the heartbeat was proven
	// with: the hold ends then at the latest. Zero: no bound.
	NotAfter time.Time
}

// Holder is a Writer that can hold an entry for as long as the connection
// its heartbeat came on stays open (*Store).
type Holder interface {
	Hold(ctx context.Context, m *Member, role string, terms HoldTerms) error
}

// holds are the entries a Store holds, by key, and its session.
type holds struct {
	mu      sync.Mutex
	session clientv3.LeaseID // zero: none yet, or lost
	started bool             // the sweep runs
	entries map[string]*held
	// granting serializes the grants of a session.
	granting sync.Mutex
}

// held is one entry a Store holds.
type held struct {
	member   *Member // as written, last_seen included
	lease    clientv3.LeaseID
	rev      int64 // the entry's mod revision as written or found
	grace    time.Duration
	deadline time.Time
	notAfter time.Time
	// closing is the connection the hold is bound to now; stop ends the
	// watch of its close.
	closing context.Context
	stop    func() bool
}

// Hold records m as the caller's entry with role, held by this Store while
// terms.Closing is not done (see above). It writes only when the entry
// differs from what the Store holds, is no longer as the Store wrote it,
// or its last_seen is due; the heartbeats in between cost one read of the
// local etcd member, and there is one every HoldFor.
func (s *Store) Hold(ctx context.Context, m *Member, role string, terms HoldTerms) error {
	if err := Check(m); err != nil {
		return err
	}

	now := s.clock.Now()
	grace := AgeOut(m.GetInterval().AsDuration())

	m = proto.CloneOf(m)
	m.Role, m.LastSeen, m.Interval, m.Held = role, timestamppb.New(now), durationpb.New(HeldInterval), true

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	lease, err := s.session(ctx)
	if err != nil {
		return err
	}

	k := key(m)

	if e := s.holds.find(k, m, lease, now); e != nil && s.stillWritten(ctx, k, e) && s.holds.rebind(k, e, now, grace, terms) {
		return nil
	}

	rev, err := s.writeHeld(ctx, m, lease)
	if err != nil {
		return err
	}

	s.holds.put(k, &held{member: m, lease: lease, rev: rev, grace: grace, notAfter: terms.NotAfter}, now, terms)

	return nil
}

// find returns the hold of k when it says what m says under lease and its
// last_seen is not yet due: then nothing need be written, as long as the
// entry is still as the hold wrote it (stillWritten).
func (h *holds) find(k string, m *Member, lease clientv3.LeaseID, now time.Time) *held {
	h.mu.Lock()
	defer h.mu.Unlock()

	e, ok := h.entries[k]
	if !ok || e.lease != lease || now.Sub(e.member.GetLastSeen().AsTime()) >= LastSeenRefresh(HeldInterval) {
		return nil
	}

	a, b := proto.CloneOf(e.member), proto.CloneOf(m)
	a.LastSeen, b.LastSeen = nil, nil

	if !proto.Equal(a, b) {
		return nil
	}

	return e
}

// rebind binds e, still the hold of k, to terms; false when the hold
// ended or changed meanwhile.
func (h *holds) rebind(k string, e *held, now time.Time, grace time.Duration, terms HoldTerms) bool {
	h.mu.Lock()
	defer h.mu.Unlock()

	if h.entries[k] != e {
		return false
	}

	e.grace, e.notAfter = grace, terms.NotAfter
	h.bindLocked(e, now, terms.Closing)

	return true
}

// stillWritten reports whether the entry at k is as the hold e wrote it,
// read from the etcd member the Store asks without a round of raft: a
// worker that moved to another control plane and back was written there
// meanwhile, and that one deletes the entry as its own hold ends unless
// it is written here again. A read that fails says no: the write decides.
func (s *Store) stillWritten(ctx context.Context, k string, e *held) bool {
	resp, err := s.cli.Get(ctx, k, clientv3.WithSerializable(), clientv3.WithKeysOnly())
	if err != nil {
		return false
	}

	kv := first(resp.Kvs)

	return kv != nil && kv.ModRevision == e.rev && clientv3.LeaseID(kv.Lease) == e.lease
}

// put records e as the hold of k, bound to closing.
func (h *holds) put(k string, e *held, now time.Time, terms HoldTerms) {
	h.mu.Lock()
	defer h.mu.Unlock()

	if old, ok := h.entries[k]; ok && old.stop != nil {
		old.stop()
	}

	if h.entries == nil {
		h.entries = map[string]*held{}
	}

	h.entries[k] = e
	h.bindLocked(e, now, terms.Closing)
}

// bindLocked sets e's deadline from a heartbeat now and binds it to the
// connection closing: when that closes, the deadline comes within the
// grace.
func (h *holds) bindLocked(e *held, now time.Time, closing context.Context) {
	e.deadline = now.Add(HoldFor + e.grace)
	if !e.notAfter.IsZero() && e.notAfter.Before(e.deadline) {
		e.deadline = e.notAfter
	}

	if e.closing == closing {
		return
	}

	if e.stop != nil {
		e.stop()
	}

	e.closing = closing
	e.stop = context.AfterFunc(closing, func() { h.closed(e, closing) })
}

// closed brings e's deadline within its grace, unless e was bound to
// another connection meanwhile. The grace is counted from the sweep that
// sees the close rather than read from a clock here: AfterFunc may run on
// any goroutine, and the sweep has the Store's clock.
func (h *holds) closed(e *held, closing context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()

	if e.closing == closing {
		e.closing, e.stop = nil, nil
	}
}

// drop forgets the hold of k: the entry was deleted or written otherwise.
func (h *holds) drop(k string) {
	h.mu.Lock()
	defer h.mu.Unlock()

	if e, ok := h.entries[k]; ok {
		if e.stop != nil {
			e.stop()
		}

		delete(h.entries, k)
	}
}

// due takes out of the table the holds whose deadline passed at now, and
// brings within its grace the deadline of each hold whose connection
// closed.
func (h *holds) due(now time.Time) map[string]*held {
	h.mu.Lock()
	defer h.mu.Unlock()

	var out map[string]*held

	for k, e := range h.entries {
		if e.closing == nil {
			e.deadline = minTime(e.deadline, now.Add(e.grace))
			e.closing = closedConn
		}

		if now.Before(e.deadline) {
			continue
		}

		if out == nil {
			out = map[string]*held{}
		}

		out[k] = e
		delete(h.entries, k)
	}

	return out
}

// closedConn marks a hold whose connection closed and whose deadline the
// sweep has brought within its grace.
var closedConn = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	return ctx
}()

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}

	return a
}

// writeHeld writes m under lease with the checks of Put (its claim on the
// entry and on its hostname, the list's bound), unless the entry already
// says what m says under lease; it returns the entry's mod revision.
func (s *Store) writeHeld(ctx context.Context, m *Member, lease clientv3.LeaseID) (int64, error) {
	k := key(m)
	s.recorded.drop(k)

	c, err := s.readClaim(ctx, m)
	if err != nil {
		return 0, err
	}

	if err := s.admit(ctx, c); err != nil {
		return 0, err
	}

	if c.entry.lease == lease && c.unchanged(m, m.GetLastSeen().AsTime()) {
		return c.entry.rev, nil
	}

	data, err := proto.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("membership: %w", err)
	}

	resp := s.writes.txn(ctx, c.cmps, c.writes(m, data, lease))

	switch {
	case resp.err != nil:
		return 0, fmt.Errorf("%w: writing the entry: %w", ErrUnavailable, resp.err)
	case !resp.succeeded:
		return 0, fmt.Errorf("%w: %s or hostname %s", ErrConflict, k, m.GetHostname())
	}

	// The entry's lease before, its own and now without keys, ends by its
	// TTL: it is never revoked here, for it may be another control plane's
	// session, which holds other entries.
	return resp.rev, nil
}

// session returns the Store's session lease, granted on first use and
// again once lost; the first grant starts the sweep of the holds.
func (s *Store) session(ctx context.Context) (clientv3.LeaseID, error) {
	s.holds.mu.Lock()
	lease := s.holds.session
	s.holds.mu.Unlock()

	if lease != 0 {
		return lease, nil
	}

	s.holds.granting.Lock()
	defer s.holds.granting.Unlock()

	s.holds.mu.Lock()
	lease = s.holds.session
	s.holds.mu.Unlock()

	if lease != 0 {
		return lease, nil
	}

	granted, err := s.cli.Grant(ctx, int64(SessionTTL/time.Second))
	if err != nil {
		return 0, fmt.Errorf("%w: granting the session's lease: %w", ErrUnavailable, err)
	}

	// The keep-alive lives as long as the client: a trustd's Store does.
	alive, err := s.cli.KeepAlive(s.cli.Ctx(), granted.ID)
	if err != nil {
		return 0, fmt.Errorf("%w: keeping the session's lease alive: %w", ErrUnavailable, err)
	}

	s.holds.mu.Lock()
	s.holds.session = granted.ID
	start := !s.holds.started
	s.holds.started = true
	s.holds.mu.Unlock()

	go s.keepSession(granted.ID, alive)

	if start {
		go s.sweepHolds(s.cli.Ctx())
	}

	return granted.ID, nil
}

// keepSession reads the keep-alive's answers until it ends: the lease
// expired (etcd out of reach for longer than SessionTTL) or the client
// closed. The entries held under it went with it: each is written again
// under a new session, as its heartbeat would.
func (s *Store) keepSession(lease clientv3.LeaseID, alive <-chan *clientv3.LeaseKeepAliveResponse) {
	for range alive { //nolint:revive // the answers are only drained
	}

	s.holds.mu.Lock()
	if s.holds.session == lease {
		s.holds.session = 0
	}

	lost := make([]*held, 0, len(s.holds.entries))
	for _, e := range s.holds.entries {
		if e.lease == lease {
			lost = append(lost, e)
		}
	}
	s.holds.mu.Unlock()

	if s.cli.Ctx().Err() != nil {
		return
	}

	s.log.Warn("membership: the session's lease was lost; writing its entries again", slog.Int(logkey.Count, len(lost)))
	s.restore(s.cli.Ctx(), lost)
}

// restore writes the entries of lost holds again under a new session,
// retrying a session etcd cannot grant yet; a hold whose entry cannot be
// written is dropped, and its worker is listed again at its next
// heartbeat, within HoldFor.
func (s *Store) restore(ctx context.Context, lost []*held) {
	retry := backoff.Backoff{Min: RetryInterval, Max: followRetryMax}

	for _, e := range lost {
		for {
			err := s.restoreOne(ctx, e)
			if err == nil || ctx.Err() != nil {
				break
			}

			s.log.Warn("membership: writing a held entry again", slog.String(logkey.Address, e.member.GetAddresses()[0]),
				slog.String(logkey.Error, err.Error()))

			if !clock.Sleep(ctx, s.clock, retry.Next()) {
				return
			}
		}

		retry.Reset()
	}
}

// restoreOne writes e's entry again under the session, unless its hold
// ended or moved meanwhile. A refusal (the name taken since) drops the
// hold; only etcd's failure is returned, to be retried.
func (s *Store) restoreOne(ctx context.Context, e *held) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	k := key(e.member)

	s.holds.mu.Lock()
	current := s.holds.entries[k] == e
	s.holds.mu.Unlock()

	if !current {
		return nil
	}

	lease, err := s.session(ctx)
	if err != nil {
		return err
	}

	m := proto.CloneOf(e.member)
	m.LastSeen = timestamppb.New(s.clock.Now())

	rev, err := s.writeHeld(ctx, m, lease)

	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()

	if s.holds.entries[k] != e {
		return nil
	}

	switch {
	case err == nil:
		e.member, e.lease, e.rev = m, lease, rev
	case errors.Is(err, ErrUnavailable):
		return err
	default:
		if e.stop != nil {
			e.stop()
		}

		delete(s.holds.entries, k)
	}

	return nil
}

// sweepHolds ends, every HoldSweep until ctx ends, the holds whose
// deadline passed: each entry is deleted if it is still as this Store
// wrote it.
func (s *Store) sweepHolds(ctx context.Context) {
	for clock.Sleep(ctx, s.clock, HoldSweep) {
		for k, e := range s.holds.due(s.clock.Now()) {
			if err := s.release(ctx, k, e); err != nil {
				s.log.Warn("membership: ending a hold", slog.String(logkey.Address, e.member.GetAddresses()[0]),
					slog.String(logkey.Error, err.Error()))
			}
		}
	}
}

// release deletes the entry of the hold e ended, with its name key, if
// both are as e left them: a worker that moved to another control plane
// meanwhile was written there, and keeps its entry.
func (s *Store) release(ctx context.Context, k string, e *held) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	_, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", e.rev), clientv3.Compare(clientv3.LeaseValue(k), "=", e.lease)).
		Then(clientv3.OpDelete(k), dropName(e.member)).
		Commit()
	if err != nil {
		return fmt.Errorf("%w: deleting the entry: %w", ErrUnavailable, err)
	}

	return nil
}
