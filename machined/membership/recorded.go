package membership

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// recorded is what a Store last wrote, or found unchanged and renewed, of
// each entry, by key: the entry, the lease it and its name key are under,
// and the revisions they were at. A trustd takes the heartbeats of its
// share of the workers, each every interval, and nearly every one says
// what the last said: recorded answers it with the lease's keep-alive
// alone, without the read of the entry and its name key that
// renewUnchanged would make. When the entry's last_seen is due, the entry
// is written over what was recorded, in a transaction that compares the
// revisions recorded, again without a read (refreshRecorded).
//
// It can be believed no further than the lease and those revisions. Every
// change to an entry that is not a heartbeat of its own node ends the
// lease: a write that moves the entry to a new lease revokes the old one,
// and so do a leave (Delete) and a removal (Remove), and an entry aged out
// went with its lease. A keep-alive that finds the lease gone drops what
// was recorded and Put reads etcd. What the keep-alive cannot see is
// another control plane writing the node's heartbeat under the same lease,
// after the node moved there and back; that write says what the node
// said, and the write of last_seen finds it by its revision.
type recorded struct {
	mu      sync.Mutex
	entries map[string]recordedEntry
	swept   time.Time
}

// recordedEntry is an entry as a Store left it.
type recordedEntry struct {
	// member is the entry without last_seen.
	member *Member
	// lastSeen is the entry's last_seen.
	lastSeen time.Time
	lease    clientv3.LeaseID
	// rev and nameRev are the revisions the entry and its name key were
	// written at.
	rev, nameRev int64
}

// put records m, written or renewed under lease, its entry at revision
// rev and its name key at nameRev.
func (r *recorded) put(m *Member, lease clientv3.LeaseID, rev, nameRev int64) {
	e := recordedEntry{member: proto.CloneOf(m), lastSeen: m.GetLastSeen().AsTime(), lease: lease, rev: rev, nameRev: nameRev}
	e.member.LastSeen = nil

	r.mu.Lock()
	defer r.mu.Unlock()

	if r.entries == nil {
		r.entries = map[string]recordedEntry{}
	}

	r.entries[key(m)] = e
}

// find returns what was recorded of m's entry when it says what m says
// (only last_seen may differ) and its last_seen is not yet stale at now;
// due says the last_seen is LastSeenRefresh old, to be written. Entries
// recorded stale are dropped now and then: a node that moved to another
// control plane leaves no entry here for long.
func (r *recorded) find(m *Member, now time.Time) (e recordedEntry, due, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()

	interval := m.GetInterval().AsDuration()
	if now.Sub(r.swept) >= LastSeenRefresh(interval) {
		r.swept = now
		for k, e := range r.entries {
			if now.Sub(e.lastSeen) >= StaleAfter(e.member.GetInterval().AsDuration()) {
				delete(r.entries, k)
			}
		}
	}

	e, ok = r.entries[key(m)]
	if age := now.Sub(e.lastSeen); !ok || age < 0 || age >= StaleAfter(interval) {
		return recordedEntry{}, false, false
	}

	b := proto.CloneOf(m)
	b.LastSeen = nil

	if !proto.Equal(e.member, b) {
		return recordedEntry{}, false, false
	}

	return e, now.Sub(e.lastSeen) >= LastSeenRefresh(interval), true
}

// drop forgets what was recorded of the entry at k.
func (r *recorded) drop(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()

	delete(r.entries, k)
}

// renewRecorded renews the lease of m's entry, and reports so, when what
// the Store recorded of the entry says what m says (find); when its
// last_seen is due, it writes it too (refreshRecorded). A lease that is
// gone, or has another TTL, renews nothing, drops the record and is no
// error: Put reads etcd.
func (s *Store) renewRecorded(ctx context.Context, m *Member, ttl int64) (bool, error) {
	e, due, ok := s.recorded.find(m, m.GetLastSeen().AsTime())
	if !ok {
		return false, nil
	}

	renewed, err := s.renew(ctx, e.lease, ttl)

	switch {
	case err != nil:
		return false, err
	case !renewed:
		s.recorded.drop(key(m))

		return false, nil
	case !due:
		return true, nil
	}

	return s.refreshRecorded(ctx, m, e)
}

// refreshRecorded writes m, whose last_seen is due, over the entry e
// recorded, under e's lease: only if the entry and its name key are still
// at the revisions recorded, so that what was checked when they were
// written or read still holds (the entry is this node's, the name key
// points at it). Anything else drops the record and reports false: Put
// reads etcd and decides there.
func (s *Store) refreshRecorded(ctx context.Context, m *Member, e recordedEntry) (bool, error) {
	data, err := proto.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("membership: %w", err)
	}

	k := key(m)

	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(k), "=", e.rev),
		clientv3.Compare(clientv3.ModRevision(nameKey(m.GetHostname())), "=", e.nameRev),
	).Then(clientv3.OpPut(k, string(data), clientv3.WithLease(e.lease))).Commit()
	if err != nil || !resp.Succeeded {
		s.recorded.drop(k)

		return false, nil
	}

	s.recorded.put(m, e.lease, resp.Header.GetRevision(), e.nameRev)

	return true, nil
}
