package membership

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// namePrefix is the hostname index: one key per hostname an entry holds,
// whose value is the first address of that entry (its key under prefix).
// It is written in the entry's own transaction, under the entry's lease,
// so it ages out with the entry; it lies outside prefix, so the list's
// readers and watchers never see it. The entry's key is the index of its
// first address.
const namePrefix = "/aegis/member-names/"

func nameKey(hostname string) string { return namePrefix + hostname }

// claim is what an entry's write depends on, as Put read it: the entry
// and the name key, and the compares that let the write through only if
// none of what was read changed meanwhile.
type claim struct {
	entry stored
	// current is the entry as read, decoded; nil when there is none or it
	// is damaged.
	current *Member
	// name is the name key as read; owned when it already points at the
	// entry.
	name  stored
	owned bool
	// renamed is the hostname the entry held before, when it differs.
	renamed string
	cmps    []clientv3.Cmp
}

// readClaim reads what m's write depends on, in one round trip when the
// name key is present (the steady state): m's own entry and the key of its
// hostname. It refuses what Put refuses: a worker's entry over a live
// control plane's, and a hostname another live node holds.
func (s *Store) readClaim(ctx context.Context, m *Member) (*claim, error) {
	k, nk := key(m), nameKey(m.GetHostname())

	resp := s.reads.txn(ctx, nil, []clientv3.Op{clientv3.OpGet(k), clientv3.OpGet(nk)})
	if resp.err != nil {
		return nil, fmt.Errorf("%w: reading the entry and its name: %w", ErrUnavailable, resp.err)
	}

	c := &claim{}

	if kv := first(resp.responses[0].GetResponseRange().GetKvs()); kv != nil {
		c.entry = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}

		old := decode(kv)
		c.current = old

		if err := s.checkEntry(m, old); err != nil {
			return nil, err
		}

		if old != nil && old.GetHostname() != m.GetHostname() {
			c.renamed = old.GetHostname()
		}
	}

	c.cmps = append(c.cmps, clientv3.Compare(clientv3.ModRevision(k), "=", c.entry.rev))

	kv := first(resp.responses[1].GetResponseRange().GetKvs())
	if err := s.checkName(ctx, m, kv, c); err != nil {
		return nil, err
	}

	return c, nil
}

// checkEntry refuses a worker's entry over cur, the live entry of a
// control plane at the same address. A damaged entry (nil) is written
// over.
func (s *Store) checkEntry(m, cur *Member) error {
	if cur != nil && cur.GetRole() == RoleControlPlane && m.GetRole() != RoleControlPlane && !Stale(cur, s.clock.Now()) {
		return fmt.Errorf("%w: %s is a control plane's entry", ErrNotOwner, m.GetAddresses()[0])
	}

	return nil
}

// checkName refuses m's hostname when the node the name key points at
// still holds it, and adds to c the compares of what it read. A name key
// is believed only as far as the entry it points at: one whose entry is
// gone, aged out or renamed is taken over. A missing name key is never
// taken to mean a free name (an entry written before the index, or one
// whose key was lost, has none): every entry is read instead.
func (s *Store) checkName(ctx context.Context, m *Member, kv *mvccpb.KeyValue, c *claim) error {
	nk := nameKey(m.GetHostname())

	if kv == nil {
		c.cmps = append(c.cmps, clientv3.Compare(clientv3.ModRevision(nk), "=", 0))

		return s.scanClaim(ctx, m)
	}

	c.name = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}
	c.cmps = append(c.cmps, clientv3.Compare(clientv3.ModRevision(nk), "=", kv.ModRevision))

	holder := string(kv.Value)
	if holder == m.GetAddresses()[0] {
		c.owned = true

		return nil
	}

	hk := prefix + holder

	resp, err := s.cli.Get(ctx, hk)
	if err != nil {
		return fmt.Errorf("%w: reading the entry holding the name: %w", ErrUnavailable, err)
	}

	var rev int64

	if h := first(resp.Kvs); h != nil {
		rev = h.ModRevision

		if cur := decode(h); cur != nil && cur.GetHostname() == m.GetHostname() && !Stale(cur, s.clock.Now()) {
			return fmt.Errorf("%w: hostname %s is held by %s", ErrNotOwner, m.GetHostname(), holder)
		}
	}

	// The holder's entry must stay as read: a heartbeat of it in between
	// makes its claim live again, and this write a conflict.
	c.cmps = append(c.cmps, clientv3.Compare(clientv3.ModRevision(hk), "=", rev))

	return nil
}

// scanClaim refuses m's hostname if another live entry holds it, as read
// from every entry, page by page at one revision: the check of a name
// without its key, as before the index. It is needed only for an entry
// written without its key (by a version before the index); an entry
// written with one is found by its key. So one read of every entry serves
// the checks of NamesFresh: a node's first heartbeat, and each node's
// first after an upgrade from a version without the index, cost a lookup
// rather than a read of the whole list (with 5,000 members, the reads of
// their first heartbeats were a sixth of trustd's CPU and most of etcd's).
// The read may be NamesFresh old: an entry renamed or gone since still
// holds its name until the next read (the check fails closed), and an
// entry written without its key since is missed until then.
func (s *Store) scanClaim(ctx context.Context, m *Member) error {
	names, err := s.hostnames(ctx)
	if err != nil {
		return err
	}

	if addr, held := names.byName[m.GetHostname()]; held && addr != m.GetAddresses()[0] && !names.stale(m.GetHostname(), s.clock.Now()) {
		return fmt.Errorf("%w: hostname %s is held by %s", ErrNotOwner, m.GetHostname(), addr)
	}

	return nil
}

// hostnames is one read of every live entry: each hostname with the first
// address of its entry and the moment it goes stale.
type hostnames struct {
	byName  map[string]string
	staleAt map[string]time.Time
}

func (h *hostnames) stale(name string, now time.Time) bool { return now.After(h.staleAt[name]) }

// hostnames returns a read of every live entry at most NamesFresh old
// (sharedRead).
func (s *Store) hostnames(ctx context.Context) (*hostnames, error) {
	h, _, err := s.names.get(ctx)

	return h, err
}

// readHostnames reads every live entry's hostname.
func (s *Store) readHostnames(ctx context.Context) (*hostnames, error) {
	now := s.clock.Now()
	h := &hostnames{byName: map[string]string{}, staleAt: map[string]time.Time{}}

	_, err := s.scan(ctx, func(kv *mvccpb.KeyValue) {
		if cur := decode(kv); cur != nil && !Stale(cur, now) {
			h.byName[cur.GetHostname()] = cur.GetAddresses()[0]
			h.staleAt[cur.GetHostname()] = staleAt(cur)
		}
	})
	if err != nil {
		return nil, err
	}

	return h, nil
}

// unchanged reports whether the entry as read already says what m says,
// under the name key it owns and with a last_seen at most LastSeenRefresh
// old at now: then a heartbeat keeps the entry's lease alive and writes
// nothing. Only last_seen may differ.
func (c *claim) unchanged(m *Member, now time.Time) bool {
	cur := c.current
	if cur == nil || !c.owned || c.renamed != "" || c.entry.lease == 0 || c.name.lease != c.entry.lease {
		return false
	}

	if age := now.Sub(cur.GetLastSeen().AsTime()); age < 0 || age >= LastSeenRefresh(m.GetInterval().AsDuration()) {
		return false
	}

	a, b := proto.CloneOf(cur), proto.CloneOf(m)
	a.LastSeen, b.LastSeen = nil, nil

	return proto.Equal(a, b)
}

// writes are the operations of m's write under lease: the entry, its name
// key unless it already points at the entry under that lease, and the
// removal of the key of a hostname the entry held before, if it still
// points at the entry.
func (c *claim) writes(m *Member, data []byte, lease clientv3.LeaseID) []clientv3.Op {
	addr := m.GetAddresses()[0]
	ops := []clientv3.Op{clientv3.OpPut(key(m), string(data), clientv3.WithLease(lease))}

	if c.writesName(lease) {
		ops = append(ops, clientv3.OpPut(nameKey(m.GetHostname()), addr, clientv3.WithLease(lease)))
	}

	if c.renamed != "" {
		ops = append(ops, dropName(&Member{Hostname: c.renamed, Addresses: m.GetAddresses()}))
	}

	return ops
}

// writesName reports whether a write under lease writes the name key too:
// unless it already points at the entry under that lease.
func (c *claim) writesName(lease clientv3.LeaseID) bool { return !c.owned || c.name.lease != lease }

// dropName deletes the name key of m's hostname if it still points at m's
// entry: an operation of the transaction that deletes or renames the
// entry, so the index never keeps a name for an entry that gave it up.
func dropName(m *Member) clientv3.Op {
	k := nameKey(m.GetHostname())

	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "=", m.GetAddresses()[0])},
		[]clientv3.Op{clientv3.OpDelete(k)}, nil)
}

// first is the first of kvs, or nil.
func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}

	return kvs[0]
}
