package membership

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// recorded is what a Store last wrote, or found unchanged and renewed, of
// each entry, by key: the entry and the lease it and its name key are
// under. A trustd takes the heartbeats of its share of the workers, each
// every interval, and nearly every one says what the last said: recorded
// answers it with the lease's keep-alive alone, without the read of the
// entry and its name key that renewUnchanged would make.
//
// It can be believed no further than the lease. Every change to an entry
// that is not a heartbeat of its own node ends the lease: a write that
// moves the entry to a new lease revokes the old one, and so do a leave
// (Delete) and a removal (Remove), and an entry aged out went with its
// lease. A keep-alive that finds the lease gone drops what was recorded
// and Put reads etcd. What recorded cannot see is another control plane
// writing the node's heartbeat under the same lease, after the node moved
// there and back; that write says what the node said, and the entry is
// read again, and written, once its last_seen is LastSeenRefresh old
// anyway.
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
}

// put records m, written or renewed under lease.
func (r *recorded) put(m *Member, lease clientv3.LeaseID) {
	e := recordedEntry{member: proto.CloneOf(m), lastSeen: m.GetLastSeen().AsTime(), lease: lease}
	e.member.LastSeen = nil

	r.mu.Lock()
	defer r.mu.Unlock()

	if r.entries == nil {
		r.entries = map[string]recordedEntry{}
	}

	r.entries[key(m)] = e
}

// unchanged returns the lease of m's entry when the entry recorded says
// what m says (only last_seen may differ) and its last_seen is less than
// LastSeenRefresh old at now; else 0. Entries recorded that old are
// dropped now and then: their next heartbeat writes anyway, and a node
// that moved to another control plane leaves no entry here for long.
func (r *recorded) unchanged(m *Member, now time.Time) clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()

	refresh := LastSeenRefresh(m.GetInterval().AsDuration())
	if now.Sub(r.swept) >= refresh {
		r.swept = now
		for k, e := range r.entries {
			if now.Sub(e.lastSeen) >= LastSeenRefresh(e.member.GetInterval().AsDuration()) {
				delete(r.entries, k)
			}
		}
	}

	e, ok := r.entries[key(m)]
	if age := now.Sub(e.lastSeen); !ok || age < 0 || age >= refresh {
		return 0
	}

	b := proto.CloneOf(m)
	b.LastSeen = nil

	if !proto.Equal(e.member, b) {
		return 0
	}

	return e.lease
}

// drop forgets what was recorded of the entry at k.
func (r *recorded) drop(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()

	delete(r.entries, k)
}

// renewRecorded renews the lease of m's entry, and reports so, when what
// the Store recorded of the entry says what m says (recorded). A lease
// that is gone, or has another TTL, renews nothing, drops the record and
// is no error: Put reads etcd.
func (s *Store) renewRecorded(ctx context.Context, m *Member, ttl int64) (bool, error) {
	lease := s.recorded.unchanged(m, m.GetLastSeen().AsTime())
	if lease == 0 {
		return false, nil
	}

	renewed, err := s.renew(ctx, lease, ttl)
	if err == nil && !renewed {
		s.recorded.drop(key(m))
	}

	return renewed, err
}
