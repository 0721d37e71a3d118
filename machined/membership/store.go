package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/etcdutil"
)

// prefix is where the entries live in etcd, one key per node under its
// first address.
const prefix = "/aegis/members/"

// Config configures a Store.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// Clock stamps last_seen, ages entries out on read and times Follow's
	// retries. Nil means the system clock.
	Clock clock.Clock
	// Rand jitters Follow's retries. Nil means crypto/rand.
	Rand io.Reader
	// Logger receives Follow's failures. Nil discards.
	Logger *slog.Logger
	// MaxMembers bounds the entries Put admits; readers refuse a list of
	// more than twice as many. Zero means MaxMembers.
	MaxMembers int
	// KeepAlive renews an entry's lease once. Nil means Client's
	// KeepAliveOnce; a trustd that takes the heartbeats of many nodes
	// sends them to etcd's leader (etcdutil.Leader).
	KeepAlive func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
	// Copy is the list as FollowChanges keeps it: a Store's FollowChanges
	// keeps it current, and List answers from it when it is (copy.go).
	// Nil: List reads every entry, and FollowChanges keeps no copy.
	Copy *Copy
}

// Store is the member list in etcd. It is safe for concurrent use.
type Store struct {
	cli   *clientv3.Client
	clock clock.Clock
	rand  io.Reader
	log   *slog.Logger
	max   int

	// names is every live entry's hostname, for the check of a name
	// without its key (claims.go); counted is the count of the list
	// (count.go). Each is read for all the calls that need it.
	names   *sharedRead[*hostnames]
	counted *sharedRead[int64]

	// reads and writes join the claims' reads and the entries' writes of
	// concurrent calls, each into one transaction (batch.go).
	reads, writes *batcher

	// count is what admit goes by besides counted (count.go); guarded by
	// countMu.
	countMu sync.Mutex
	count   entryCount

	// afterLoad, when set by a test, runs after each of Follow's reads,
	// before its watch starts.
	afterLoad func()
	// beforeRemove, when set by a test, runs between Remove's read and
	// its transaction.
	beforeRemove func()
	// beforePut, when set by a test, runs between Put's reads and its
	// transaction.
	beforePut func()
	// keepAlive renews a lease once (Config.KeepAlive).
	keepAlive func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)

	// recorded is what this Store last wrote or found of each entry it
	// renewed (recorded.go).
	recorded recorded
	// holds are the entries this Store holds for their connections
	// (hold.go).
	holds holds

	copy *Copy // Config.Copy
}

// New makes a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("membership: Client is required")
	}

	limit := cfg.MaxMembers
	if limit <= 0 {
		limit = MaxMembers
	}

	keepAlive := cfg.KeepAlive
	if keepAlive == nil {
		keepAlive = cfg.Client.KeepAliveOnce
	}

	s := &Store{
		cli: cfg.Client, clock: defaults.Clock(cfg.Clock), rand: defaults.Rand(cfg.Rand), log: defaults.Logger(cfg.Logger),
		max: limit, keepAlive: keepAlive, copy: cfg.Copy,
	}
	s.reads = newBatcher(cfg.Client, callTimeout, MaxBatchOps, MaxBatchesInFlight)
	s.writes = newBatcher(cfg.Client, callTimeout, MaxBatchOps, MaxBatchesInFlight)
	s.names = &sharedRead[*hostnames]{maxAge: NamesFresh, clock: s.clock, read: s.readHostnames}
	s.counted = &sharedRead[int64]{maxAge: CountFresh, clock: s.clock, read: s.readCount}

	return s, nil
}

func key(m *Member) string { return prefix + m.GetAddresses()[0] }

// Put records m as the caller's entry with role, stamped now, under a lease
// of its age-out. A worker never replaces a control plane's entry, and no
// entry takes a hostname another live node holds. The entry is written
// only if nothing changed it since it was read, and only if something
// other than last_seen changed or last_seen is LastSeenRefresh old: else
// Put renews the entry's lease alone.
func (s *Store) Put(ctx context.Context, m *Member, role string) error {
	if err := Check(m); err != nil {
		return err
	}

	// Role, last_seen and held are the server's to say, never the node's.
	m = proto.CloneOf(m)
	m.Role, m.LastSeen, m.Held = role, timestamppb.New(s.clock.Now()), false

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	ttl := int64(math.Ceil(AgeOut(m.GetInterval().AsDuration()).Seconds()))

	// The steady state: nothing but last_seen would change, and it is
	// recent. The lease's keep-alive, answered by etcd's leader without a
	// write through raft, keeps the entry and its name key alive. What
	// this Store recorded of the entry answers first, then a read.
	renewed, err := s.renewRecorded(ctx, m, ttl)
	if err != nil || renewed {
		return err
	}

	renewed, err = s.renewUnchanged(ctx, m, ttl)
	if err != nil || renewed {
		return err
	}

	c, err := s.readClaim(ctx, m)
	if err != nil {
		return err
	}

	if err := s.admit(ctx, c); err != nil {
		return err
	}

	if c.unchanged(m, m.GetLastSeen().AsTime()) {
		renewed, err := s.renew(ctx, c.entry.lease, ttl)
		if renewed {
			s.recorded.put(c.current, c.entry.lease, c.entry.rev, c.name.rev)
		}

		if err != nil || renewed {
			return err
		}
	}

	data, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("membership: %w", err)
	}

	// A held entry's lease is its control plane's session, which holds
	// other entries too: never renewed for this entry, nor revoked.
	old := c.entry.lease
	if c.current.GetHeld() {
		old = 0
	}

	lease, err := s.leaseFor(ctx, old, ttl)
	if err != nil {
		return err
	}

	if s.beforePut != nil {
		s.beforePut()
	}

	resp := s.writes.txn(ctx, c.cmps, c.writes(m, data, lease))

	switch {
	case resp.err != nil:
		return fmt.Errorf("%w: writing the entry: %w", ErrUnavailable, resp.err)
	case !resp.succeeded:
		return fmt.Errorf("%w: %s or hostname %s", ErrConflict, key(m), m.GetHostname())
	}

	nameRev := c.name.rev
	if c.writesName(lease) {
		nameRev = resp.rev
	}

	s.recorded.put(m, lease, resp.rev, nameRev)

	// An entry that moved to a new lease leaves the old one, which would
	// otherwise linger until it expires: one lease per node. Best effort.
	if old != 0 && old != lease {
		_, _ = s.cli.Revoke(ctx, old)
	}

	return nil
}

// leaseFor returns the lease an entry is written under: the entry's own,
// old, renewed by a keep-alive when it still has the TTL wanted, else a
// new one. A keep-alive is answered by etcd's leader without a write
// through raft, so a heartbeat costs one write (the entry) instead of
// three (a grant, the entry and the revocation of the old lease).
func (s *Store) leaseFor(ctx context.Context, old clientv3.LeaseID, ttl int64) (clientv3.LeaseID, error) {
	if old != 0 {
		renewed, err := s.renew(ctx, old, ttl)
		if err != nil {
			return 0, err
		}

		if renewed {
			return old, nil
		}
	}

	granted, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("%w: granting the entry's lease: %w", ErrUnavailable, err)
	}

	return granted.ID, nil
}

// renewUnchanged renews the lease of m's entry, and reports so, when the
// entry and its name key already say what m says (only last_seen, recent,
// may differ). It reads them from the etcd member it asks, without a round
// of raft (a serializable read): the steady state's heartbeat costs that
// member's read and the leader's keep-alive, and no agreement among the
// members. A read a moment behind the leader renews nothing but a lease:
// an entry changed meanwhile is seen by the next heartbeat, and one that
// left with its lease fails the keep-alive. Whatever else, Put decides on
// a linearizable read.
func (s *Store) renewUnchanged(ctx context.Context, m *Member, ttl int64) (bool, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(key(m), clientv3.WithSerializable()),
		clientv3.OpGet(nameKey(m.GetHostname()), clientv3.WithSerializable()),
	).Commit()
	if err != nil {
		return false, nil
	}

	c := &claim{}

	if kv := first(resp.Responses[0].GetResponseRange().GetKvs()); kv != nil {
		c.entry = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}
		c.current = decode(kv)
	}

	if kv := first(resp.Responses[1].GetResponseRange().GetKvs()); kv != nil {
		c.name = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}
		c.owned = string(kv.Value) == m.GetAddresses()[0]
	}

	if !c.unchanged(m, m.GetLastSeen().AsTime()) {
		return false, nil
	}

	renewed, err := s.renew(ctx, c.entry.lease, ttl)
	if renewed {
		s.recorded.put(c.current, c.entry.lease, c.entry.rev, c.name.rev)
	}

	return renewed, err
}

// renew keeps lease alive and reports whether it still has the TTL
// wanted. A lease that is gone, or has another TTL, is not renewed and
// no error: the entry is written under a new one. A keep-alive that fails
// for any other reason is ErrUnavailable, and nothing is written: a write
// costs etcd four times a keep-alive (a second keep-alive, a grant, the
// transaction and a revocation), and would land on the very etcd that
// failed it.
func (s *Store) renew(ctx context.Context, lease clientv3.LeaseID, ttl int64) (bool, error) {
	if lease == 0 {
		return false, nil
	}

	ka, err := s.keepAlive(ctx, lease)

	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: renewing the lease of the entry: %w", ErrUnavailable, err)
	}

	return ka.TTL == ttl, nil
}

// Delete removes the entry of the node whose first address is address, as
// that node leaves the cluster, on behalf of a node of role: a worker never
// removes a control plane's entry. An entry already gone is not an error.
// The entry is deleted only if nothing changed it since it was read.
func (s *Store) Delete(ctx context.Context, address, role string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	k := prefix + address
	s.recorded.drop(k)
	s.holds.drop(k)

	got, err := s.cli.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}

	var cur stored

	ops := []clientv3.Op{clientv3.OpDelete(k)}

	if kv := first(got.Kvs); kv != nil {
		cur = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}

		if c := decode(kv); c != nil {
			if c.GetRole() == RoleControlPlane && role != RoleControlPlane {
				return fmt.Errorf("%w: %s is a control plane's entry", ErrNotOwner, address)
			}

			ops = append(ops, dropName(c))

			if c.GetHeld() {
				cur.lease = 0 // a session's: see Put
			}
		}
	}

	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
		Then(ops...).
		Commit()

	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !resp.Succeeded:
		return fmt.Errorf("%w: %s", ErrConflict, k)
	}

	if cur.lease != 0 {
		_, _ = s.cli.Revoke(ctx, cur.lease) // best effort, as in Put
	}

	return nil
}

// stored is what etcd holds of a key: its mod revision and lease.
type stored struct {
	rev   int64
	lease clientv3.LeaseID
}

// List returns the live members, sorted by hostname: from Config.Copy
// when it is current, else read from etcd.
func (s *Store) List(ctx context.Context) ([]*Member, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	all, copied, err := s.fromCopy(ctx)
	if err != nil {
		return nil, err
	}

	if !copied {
		if all, _, err = s.read(ctx); err != nil {
			return nil, err
		}
	}

	now := s.clock.Now()

	return slices.DeleteFunc(all, func(m *Member) bool { return Stale(m, now) }), nil
}

// read returns every entry, sorted by hostname, and the mod revision and
// lease of each key (absent: zero).
func (s *Store) read(ctx context.Context) ([]*Member, map[string]stored, error) {
	keys := map[string]stored{}

	var out []*Member

	_, err := s.scan(ctx, func(kv *mvccpb.KeyValue) {
		keys[string(kv.Key)] = stored{rev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}

		// An entry that does not decode is skipped, never served.
		if m := decode(kv); m != nil {
			out = append(out, m)
		}
	})
	if err != nil {
		return nil, nil, err
	}

	slices.SortFunc(out, func(a, b *Member) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })

	return out, keys, nil
}

// scan calls each with every entry's key, in pages of scanPage read at one
// revision, which it returns: the whole list whatever its size, each page
// a small reply. It refuses a list of more than twice the entries Put
// admits (new entries racing the count, or keys some other writer put),
// rather than hand back a part of it.
func (s *Store) scan(ctx context.Context, each func(kv *mvccpb.KeyValue)) (int64, error) {
	rev, err := etcdutil.Scan(ctx, s.cli, prefix, scanPage, 2*s.max, each)

	switch {
	case errors.Is(err, etcdutil.ErrTooMany):
		return 0, fmt.Errorf("%w: the member list holds more than %d entries, twice its bound", ErrFull, 2*s.max)
	case err != nil:
		return 0, fmt.Errorf("%w: reading every entry: %w", ErrUnavailable, err)
	}

	return rev, nil
}

// Remove deletes the entries of the worker named by node (its hostname or
// one of its addresses) once they are aged out: the node is gone, and an
// operator takes it out of the cluster. It refuses a control plane's entry
// (ErrControlPlane) and one still kept by heartbeats (ErrAlive), and
// returns the entries deleted, none when nothing matches. The entries are
// deleted only if nothing changed them since they were read: a heartbeat
// that arrives meanwhile keeps the node in.
func (s *Store) Remove(ctx context.Context, node string) ([]*Member, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	// An aged-out entry may leave by its lease, or a node heartbeat,
	// between the read and the transaction: read again and decide anew.
	for attempt := 1; ; attempt++ {
		gone, err := s.removeOnce(ctx, node)
		if !errors.Is(err, ErrConflict) || attempt == removeAttempts {
			return gone, err
		}
	}
}

// removeOnce reads node's entries and deletes them if each is removable,
// in one transaction on the revisions read.
func (s *Store) removeOnce(ctx context.Context, node string) ([]*Member, error) {
	current, keys, err := s.read(ctx)
	if err != nil {
		return nil, err
	}

	now := s.clock.Now()

	var (
		gone []*Member
		cmps []clientv3.Cmp
		ops  []clientv3.Op
	)

	for _, c := range current {
		if c.GetHostname() != node && !slices.Contains(c.GetAddresses(), node) {
			continue
		}

		if err := removable(c, now); err != nil {
			return nil, err
		}

		gone = append(gone, c)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key(c)), "=", keys[key(c)].rev))
		ops = append(ops, clientv3.OpDelete(key(c)))
	}

	if len(gone) == 0 {
		return nil, nil
	}

	if s.beforeRemove != nil {
		s.beforeRemove()
	}

	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()

	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !resp.Succeeded:
		return nil, fmt.Errorf("%w: the entry of %s", ErrConflict, node)
	}

	for _, c := range gone {
		s.holds.drop(key(c))

		if l := keys[key(c)].lease; l != 0 && !c.GetHeld() {
			_, _ = s.cli.Revoke(ctx, l) // best effort, as in Put
		}
	}

	return gone, nil
}

// removable refuses to remove m, a control plane's entry or a live one.
func removable(m *Member, now time.Time) error {
	name := describe(m.GetHostname(), m.GetAddresses())

	if m.GetRole() == RoleControlPlane {
		return fmt.Errorf("%w: %s is a control plane; it leaves the cluster through etcd's member removal "+
			"(aegisctl etcd remove-member, or a reset of the node)", ErrControlPlane, name)
	}

	if m.GetHeld() && !Stale(m, now) {
		return fmt.Errorf("%w: %s is connected to a control plane, which holds its entry for that connection; stop or reset it first",
			ErrAlive, name)
	}

	if !Stale(m, now) {
		return fmt.Errorf("%w: %s still sends heartbeats (its entry was written %s ago; it ages out %s after the last one); stop or reset it first",
			ErrAlive, name, now.Sub(m.GetLastSeen().AsTime()).Round(time.Second), AgeOut(m.GetInterval().AsDuration()))
	}

	return nil
}
