// Package namestore records in etcd which node holds each name a token
// certificate carries (trustd.Names): one key per name, bound to the
// addresses of the node whose live certificate names it, until that
// certificate expires. A binding is written by a transaction that compares
// the key's revision with the one its check read, so two joins for one
// name never both win; its etcd lease ends with the certificate, so names
// of nodes gone free themselves.
package namestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/trustd"
)

// DefaultPrefix is where the bindings live in etcd.
const DefaultPrefix = "/aegis/names/"

// Config configures a Store.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// Prefix of the keys. Empty means DefaultPrefix.
	Prefix string
	// Members returns the live entries of the cluster's member list. The
	// control planes' names are reserved (only control planes write their
	// entries, through etcd), and a worker's name is held by the addresses
	// of its entry (its heartbeats are proven by its certificate), so a
	// node that joined before its name was bound here keeps it. Once the
	// list is followed (KnowMembers), it is read only for a name an entry
	// of another address holds. Nil means none: etcd's member names and
	// the bindings alone.
	Members func(ctx context.Context) ([]Entry, error)
	// Clock decides whether a binding is still live. Nil means the system
	// clock.
	Clock clock.Clock
}

// Entry is a member list entry as the record reads it.
type Entry struct {
	// Name is the entry's hostname.
	Name string
	// Addresses are the entry's addresses, which hold its name.
	Addresses []netip.Addr
	// ControlPlane marks a control plane's entry, whose name is reserved.
	ControlPlane bool
}

// Store is the names' record in etcd. It is safe for concurrent use.
type Store struct {
	cfg Config

	mu         sync.Mutex
	cps        []string  // the control planes' names last read
	cpsExpires time.Time // when they are read again
	// cpsRead is the read of the control planes' names under way; nil
	// while none is.
	cpsRead *cpsRead
	// members is the member list as followed (KnowMembers).
	members followedMembers

	followed followed
}

var _ trustd.Names = (*Store)(nil)

// New makes a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("namestore: Client is required")
	}

	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}

	cfg.Clock = defaults.Clock(cfg.Clock)

	return &Store{cfg: cfg}, nil
}

// binding is a name's value in etcd.
type binding struct {
	Addresses []netip.Addr `json:"addresses"`
	NotAfter  time.Time    `json:"notAfter"`
}

// heldAgainst reports whether b is live at now and does not name source.
func (b *binding) heldAgainst(source netip.Addr, now time.Time) bool {
	return b != nil && now.Before(b.NotAfter) && !slices.Contains(b.Addresses, source.Unmap().WithZone(""))
}

// current is a name's binding as read, with the key's revision and lease
// (zero when absent).
type current struct {
	b     *binding
	rev   int64
	lease clientv3.LeaseID
}

func (s *Store) readMembers(ctx context.Context) ([]Entry, error) {
	if s.cfg.Members == nil {
		return nil, nil
	}

	entries, err := s.cfg.Members(ctx)
	if err != nil {
		return nil, fmt.Errorf("namestore: member list: %w", err)
	}

	return entries, nil
}

// refuseListed refuses name to source when a live entry of another node
// has it: from the list followed when it shows the name free, else from a
// read of every entry.
func (s *Store) refuseListed(ctx context.Context, name string, source netip.Addr) error {
	source = source.Unmap().WithZone("")
	if s.listedFree(name, source) {
		return nil
	}

	entries, err := s.readMembers(ctx)
	if err != nil {
		return err
	}

	for _, e := range entries {
		if ca.CanonicalName(e.Name) == name && !slices.Contains(e.Addresses, source) {
			return fmt.Errorf("%w: %s is the name of the live member at %v", trustd.ErrNameHeld, name, e.Addresses)
		}
	}

	return nil
}

// Check refuses name when a live binding holds it for another address.
func (s *Store) Check(ctx context.Context, name string, source netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	cur, err := s.read(ctx, name)
	if err != nil {
		return err
	}

	if err := s.refuseHeld(name, cur, source); err != nil {
		return err
	}

	// A node that joined before the record was reachable is known by
	// its entry alone.
	return s.refuseListed(ctx, name, source)
}

// Bind binds b.Name to b.Addresses until b.NotAfter, unless another node
// holds it. A binding already held by b.Source keeps its addresses and
// end while they are live: the certificate issued before is still valid.
func (s *Store) Bind(ctx context.Context, b trustd.Binding) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	for range bindAttempts {
		cur, err := s.read(ctx, b.Name)
		if err != nil {
			return err
		}

		if err := s.refuseHeld(b.Name, cur, b.Source); err != nil {
			return err
		}

		won, err := s.write(ctx, b, cur)
		if err != nil || won {
			return err
		}
	}

	return fmt.Errorf("namestore: the binding of %s changed concurrently %d times", b.Name, bindAttempts)
}

// Ensure binds b unless a live binding to b's addresses already covers it
// (until b.NotAfter or later): a node proving its name by the certificate
// it presents, at every heartbeat, costs nothing of etcd when the record
// already knows it. While FollowHolders runs, the bindings it follows
// answer; otherwise one read of the local etcd member's, without a round
// of raft (a serializable read). Either can only be a moment behind, and a
// binding it does not show is written by Bind, which reads through the
// leader.
func (s *Store) Ensure(ctx context.Context, b trustd.Binding) error {
	if s.followed.covers(b) {
		return nil
	}

	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	cur, err := s.read(rctx, b.Name, clientv3.WithSerializable())

	cancel()

	if err != nil {
		return err
	}

	if cur.b.covers(b) {
		return nil
	}

	return s.Bind(ctx, b)
}

// covers reports whether old, a binding as stored, already binds b: its
// name to b's addresses until b's end at least.
func (old *binding) covers(b trustd.Binding) bool {
	return old != nil && !old.NotAfter.Before(b.NotAfter) &&
		!slices.ContainsFunc(b.Addresses, func(a netip.Addr) bool { return !slices.Contains(old.Addresses, a) })
}

// write puts the new binding if the key is still at cur's revision.
func (s *Store) write(ctx context.Context, b trustd.Binding, cur current) (bool, error) {
	next := binding{Addresses: slices.Clone(b.Addresses), NotAfter: b.NotAfter}

	now := s.cfg.Clock.Now()
	if old := cur.b; old != nil && now.Before(old.NotAfter) {
		for _, a := range old.Addresses {
			if !slices.Contains(next.Addresses, a) && len(next.Addresses) < ca.MaxSANs {
				next.Addresses = append(next.Addresses, a)
			}
		}

		if old.NotAfter.After(next.NotAfter) {
			next.NotAfter = old.NotAfter
		}
	}

	data, err := json.Marshal(next)
	if err != nil {
		return false, fmt.Errorf("namestore: %w", err)
	}

	ttl := int64(math.Ceil(next.NotAfter.Sub(now).Seconds())) + leaseSlack
	lease, err := s.cfg.Client.Grant(ctx, ttl)
	if err != nil {
		return false, fmt.Errorf("namestore: lease: %w", err)
	}

	k := s.cfg.Prefix + b.Name
	resp, err := s.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
		Then(clientv3.OpPut(k, string(data), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("namestore: binding %s: %w", b.Name, err)
	}

	// The lease not used, or the one the key has left, would otherwise
	// linger until it expires. Best effort.
	unused := lease.ID
	if resp.Succeeded {
		unused = cur.lease
	}

	if unused != 0 {
		_, _ = s.cfg.Client.Revoke(ctx, unused)
	}

	return resp.Succeeded, nil
}

// refuseHeld is the refusal of name to source when cur holds it for
// another node.
func (s *Store) refuseHeld(name string, cur current, source netip.Addr) error {
	if !cur.b.heldAgainst(source, s.cfg.Clock.Now()) {
		return nil
	}

	return fmt.Errorf("%w: %s is bound to the node at %v until %s, when its certificate expires "+
		"(the node that holds it keeps it by joining from one of those addresses)",
		trustd.ErrNameHeld, name, cur.b.Addresses, cur.b.NotAfter.UTC().Format(time.RFC3339))
}

// read returns the binding of name. A value that does not parse is an
// error, not a free name: it is damage, and the name must not change hands
// because of it.
func (s *Store) read(ctx context.Context, name string, opts ...clientv3.OpOption) (current, error) {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.Prefix+name, opts...)
	if err != nil {
		return current{}, fmt.Errorf("namestore: reading %s: %w", name, err)
	}

	if len(resp.Kvs) == 0 {
		return current{}, nil
	}

	kv := resp.Kvs[0]
	cur := current{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease), b: &binding{}}

	if err := json.Unmarshal(kv.Value, cur.b); err != nil {
		return current{}, fmt.Errorf("namestore: the binding of %s does not parse: %w", name, err)
	}

	return cur, nil
}

// Release frees name when its binding names no address but the leaving
// node's (addresses: those its certificate proves), so that a node that
// leaves the cluster does not keep its name from the node that replaces
// it. A binding that also names another node's address, or none at all,
// is left as it is. The delete compares the key's revision with the one
// read, so a binding written meanwhile is never removed.
func (s *Store) Release(ctx context.Context, name string, addresses []netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	for range bindAttempts {
		cur, err := s.read(ctx, name)
		if err != nil {
			return err
		}

		if cur.b == nil || slices.ContainsFunc(cur.b.Addresses, func(a netip.Addr) bool { return !slices.Contains(addresses, a) }) {
			return nil
		}

		k := s.cfg.Prefix + name

		resp, err := s.cfg.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
			Then(clientv3.OpDelete(k)).
			Commit()
		if err != nil {
			return fmt.Errorf("namestore: releasing %s: %w", name, err)
		}

		if resp.Succeeded {
			if cur.lease != 0 {
				_, _ = s.cfg.Client.Revoke(ctx, cur.lease) // best effort: it would expire anyway
			}

			return nil
		}
	}

	return fmt.Errorf("namestore: the binding of %s changed concurrently %d times", name, bindAttempts)
}
