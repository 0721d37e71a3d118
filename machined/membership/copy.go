package membership

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Copy is the member list as a FollowChanges keeps it, every entry with
// its last-seen stamp, and the revision of etcd it holds every change up
// to. A Store given one (Config.Copy) answers List from it once a
// linearizable read of one key shows that no change since is missing,
// instead of reading every entry: at 10,000 members that read took 20
// pages on a loaded control plane, and `get members` 0.5–1.9 s. It is
// safe for concurrent use.
type Copy struct {
	mu sync.Mutex
	// cli is the client whose watch keeps the copy, by the follower
	// owner; nil while the copy is not current (not read yet, or its
	// watch ended). Only its owner changes a current copy, so that a
	// follower that ends after another began leaves the other's be.
	cli     *clientv3.Client
	owner   *follower
	entries map[string]*Member // by key
	rev     int64
	// moved is closed when rev moves or the copy stops being current.
	moved chan struct{}
}

// NewCopy returns a copy that is not current until a FollowChanges reads
// the list into it.
func NewCopy() *Copy { return &Copy{moved: make(chan struct{})} }

// The methods a follower calls do nothing on a nil Copy (a Store without
// one keeps none), and do nothing for a follower that does not own
// it.

// load makes f the owner, with the entries read at rev through cli.
func (c *Copy) load(f *follower, cli *clientv3.Client, entries map[string]*Member, rev int64) {
	if c == nil {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	c.owner, c.cli, c.entries, c.rev = f, cli, entries, rev
	c.wake()
}

// apply sets the entry of k, or drops it when m is nil.
func (c *Copy) apply(f *follower, k string, m *Member) {
	if c == nil {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.owner != f || c.cli == nil {
		return
	}

	if m == nil {
		delete(c.entries, k)
	} else {
		c.entries[k] = m
	}
}

// advance records that every change up to rev is applied.
func (c *Copy) advance(f *follower, rev int64) {
	if c == nil {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.owner != f || c.cli == nil || rev <= c.rev {
		return
	}

	c.rev = rev
	c.wake()
}

// stop makes the copy not current: its watch ended, or it missed an entry.
func (c *Copy) stop(f *follower) {
	if c == nil {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.owner != f || c.cli == nil {
		return
	}

	c.owner, c.cli, c.entries, c.rev = nil, nil, nil, 0
	c.wake()
}

func (c *Copy) wake() {
	close(c.moved)
	c.moved = make(chan struct{})
}

// at returns the entries, sorted by hostname, when the copy is kept
// through cli and holds every change up to rev. Otherwise it returns a
// channel closed when that may have changed, or nil when the copy is not
// kept through cli at all.
func (c *Copy) at(cli *clientv3.Client, rev int64) ([]*Member, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()

	switch {
	case c.cli == nil || c.cli != cli:
		return nil, nil
	case c.rev < rev:
		return nil, c.moved
	}

	out := make([]*Member, 0, len(c.entries))
	for _, m := range c.entries {
		out = append(out, m)
	}

	slices.SortFunc(out, func(a, b *Member) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })

	return out, nil
}

// fromCopy returns every entry from Config.Copy when it holds every
// change up to a linearizable read made now, and false when there is no
// copy, or it is not current, or it did not catch up within copyWait: List
// then reads every entry itself. The read is of one key, so a member
// without quorum fails it as it fails a read of the list. A copy behind
// the read is asked for its watch's progress (etcd answers with the
// revision the watch has sent every change up to), again every
// copyProgress while it waits.
func (s *Store) fromCopy(ctx context.Context) ([]*Member, bool, error) {
	if s.copy == nil {
		return nil, false, nil
	}

	resp, err := s.cli.Get(ctx, prefix, clientv3.WithKeysOnly())
	if err != nil {
		return nil, false, fmt.Errorf("%w: reading the list's revision: %w", ErrUnavailable, err)
	}

	rev := resp.Header.GetRevision()

	wait, cancel := context.WithTimeout(ctx, copyWait)
	defer cancel()

	for {
		all, moved := s.copy.at(s.cli, rev)

		switch {
		case all != nil:
			return all, true, nil
		case moved == nil:
			return nil, false, nil
		}

		// A failed request leaves the copy behind; the read below serves.
		_ = s.cli.RequestProgress(watchContext(wait))

		t := s.clock.NewTimer(copyProgress)

		select {
		case <-moved:
		case <-t.C():
		case <-wait.Done():
			t.Stop()

			return nil, false, nil
		}

		t.Stop()
	}
}

// watchContext is the context of FollowChanges's watch and of the
// requests for its progress: the etcd client runs one gRPC stream of
// watches per set of outgoing metadata, and a request for progress is
// answered on every watch of its stream. The member list's watch has a
// stream of its own, so that such requests reach it alone, and it requires
// etcd's leader, so that a member cut off from the others ends it.
func watchContext(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(metadata.NewOutgoingContext(ctx, metadata.Pairs(watchStreamKey, "members")))
}

// watchStreamKey is the metadata key that sets the member list's watch
// apart; etcd ignores it.
const watchStreamKey = "aegis-watch"
