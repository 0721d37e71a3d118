package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRevoked: a renewal asked with a certificate the list holds, itself or
// as a certificate renewed from a revoked one.
var ErrRevoked = errors.New("revocation: the certificate is revoked")

// ErrLineageFull: the certificates renewed, however indirectly, from one
// certificate reached MaxLineage; more renewals are refused until some
// expire.
var ErrLineageFull = errors.New("revocation: too many certificates renewed from one certificate")

// Link says that a certificate (Child) was issued to the holder of another
// (Parent), by a renewal: revoking the parent revokes the child. Serials are
// in the form entries hold (serial.Of).
type Link struct {
	Parent string `json:"-"`
	Child  string `json:"-"`
	// NotAfter is the child's expiry. Once it has passed, and the child has
	// no link of its own left, the link is dropped.
	NotAfter time.Time `json:"not_after"`
}

func (l Link) check() error {
	for _, s := range []string{l.Parent, l.Child} {
		if c, err := ParseSerial(s); err != nil {
			return err
		} else if c != s {
			return fmt.Errorf("%w: serial %q is not in canonical form", ErrBadEntry, s)
		}
	}

	if l.NotAfter.IsZero() {
		return fmt.Errorf("%w: serial %s: no expiry", ErrBadEntry, l.Child)
	}

	return nil
}

// lineageKey is the link's key: every child of a parent under one prefix.
func (s *Store) lineageKey(parent, child string) string {
	return s.cfg.LineagePrefix + parent + "/" + child
}

// Record keeps, durably in etcd, that child was renewed from parent; the
// caller returns the child to its holder only after Record succeeded. It
// fails with ErrRevoked when parent is revoked: a revocation that covers
// parent has written its entry, or will see this link (Revoke compares the
// lineage's revision), so a child is either covered or never handed out.
// It fails with ErrLineageFull when the parent's family (the certificates
// renewed from the same first certificate) holds MaxLineage live
// certificates: otherwise a thief renewing in a loop could grow what a
// revocation must cover past what the list holds.
func (s *Store) Record(ctx context.Context, l Link) error {
	if err := l.check(); err != nil {
		return err
	}

	value, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("revocation: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	for range maxAttempts {
		lin, rev, err := s.readLineage(ctx)
		if err != nil {
			return err
		}

		origin := lin.origin(l.Parent)
		if n := len(lin.descendants(origin, s.cfg.Clock.Now())) + 1; n >= s.cfg.MaxLineage {
			return fmt.Errorf("%w: serial %s: %d live certificates share its first certificate %s (limit %d)",
				ErrLineageFull, l.Parent, n, origin, s.cfg.MaxLineage)
		}

		// The parent not revoked, and the family as counted.
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.key(l.Parent)), "=", 0)},
			s.unchanged(lin, origin, rev)...)

		resp, err := s.cfg.Client.Txn(ctx).
			If(cmps...).
			Then(clientv3.OpPut(s.lineageKey(l.Parent, l.Child), string(value))).
			Else(clientv3.OpGet(s.key(l.Parent), clientv3.WithCountOnly())).
			Commit()
		if err != nil {
			return unavailable(err)
		}

		if resp.Succeeded {
			return nil
		}

		if resp.Responses[0].GetResponseRange().GetCount() > 0 {
			return fmt.Errorf("%w: serial %s", ErrRevoked, l.Parent)
		}
		// Another renewal in the family recorded a link in between: count
		// again.
	}

	return fmt.Errorf("%w: the lineage kept changing during the renewal of %s", ErrUnavailable, l.Parent)
}

// lineage is the links read from etcd: children by parent, parent by child.
type lineage struct {
	children map[string][]Link
	parent   map[string]string
}

// readLineage reads every link and the revision they were read at. A link
// that does not parse is skipped: no link is written that way.
func (s *Store) readLineage(ctx context.Context) (lineage, int64, error) {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.LineagePrefix, clientv3.WithPrefix())
	if err != nil {
		return lineage{}, 0, unavailable(err)
	}

	lin := lineage{children: map[string][]Link{}, parent: map[string]string{}}

	for _, kv := range resp.Kvs {
		l, ok := s.parseLink(kv.Key, kv.Value)
		if !ok {
			continue
		}

		lin.children[l.Parent] = append(lin.children[l.Parent], l)
		lin.parent[l.Child] = l.Parent
	}

	return lin, resp.Header.Revision, nil
}

func (s *Store) parseLink(key, value []byte) (Link, bool) {
	parent, child, ok := strings.Cut(strings.TrimPrefix(string(key), s.cfg.LineagePrefix), "/")
	if !ok {
		return Link{}, false
	}

	var l Link
	if err := json.Unmarshal(value, &l); err != nil {
		return Link{}, false
	}

	l.Parent, l.Child = parent, child

	return l, l.check() == nil
}

// descendants are the links to the certificates renewed from serial,
// directly or not, whose certificates have not expired at now, sorted by
// serial. An expired certificate is walked through: what was renewed from
// it before it expired may still be live.
func (lin lineage) descendants(serial string, now time.Time) []Link {
	var out []Link

	for _, l := range lin.walk(serial) {
		if !now.After(l.NotAfter) {
			out = append(out, l)
		}
	}

	slices.SortFunc(out, func(a, b Link) int { return strings.Compare(a.Child, b.Child) })

	return out
}

// walk returns every link below serial, expired or not, breadth first.
func (lin lineage) walk(serial string) []Link {
	var out []Link

	seen := map[string]bool{serial: true}
	queue := []string{serial}

	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]

		for _, l := range lin.children[p] {
			if seen[l.Child] {
				continue // serials are unique; a cycle is a corrupt store
			}

			seen[l.Child] = true
			queue = append(queue, l.Child)
			out = append(out, l)
		}
	}

	return out
}

// unchanged compares that no link was recorded after rev below serial:
// one comparison per certificate of the subtree, so that renewals
// elsewhere in the cluster do not disturb it, or one over the whole
// lineage when the subtree is larger than a transaction may compare.
func (s *Store) unchanged(lin lineage, serial string, rev int64) []clientv3.Cmp {
	walked := lin.walk(serial)
	if len(walked)+1 > maxTxnCompares {
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.cfg.LineagePrefix), "<", rev+1).WithPrefix()}
	}

	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.lineageKey(serial, "")), "<", rev+1).WithPrefix()}
	for _, l := range walked {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.lineageKey(l.Child, "")), "<", rev+1).WithPrefix())
	}

	return cmps
}

// origin is the first certificate serial was renewed from: its ancestor
// that was not renewed from any other.
func (lin lineage) origin(serial string) string {
	seen := map[string]bool{}

	for !seen[serial] {
		seen[serial] = true

		p, ok := lin.parent[serial]
		if !ok {
			break
		}

		serial = p
	}

	return serial
}

// pruneLineage deletes the links of expired certificates that no link
// leaves from any more: a link is kept while its child has descendants,
// expired or not, so that revoking an ancestor still reaches a live
// certificate renewed from an expired one.
func (s *Store) pruneLineage(ctx context.Context) (int, error) {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.LineagePrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, unavailable(err)
	}

	now := s.cfg.Clock.Now()
	fanout := map[string]int{}
	links := map[string]Link{}
	mods := map[string]int64{}

	for _, kv := range resp.Kvs {
		if l, ok := s.parseLink(kv.Key, kv.Value); ok {
			links[string(kv.Key)], mods[string(kv.Key)] = l, kv.ModRevision
			fanout[l.Parent]++
		} else {
			links[string(kv.Key)], mods[string(kv.Key)] = Link{}, kv.ModRevision // unreadable: dropped
		}
	}

	// Drop leaves until none is left to drop: the link of an expired
	// certificate whose own links have all been dropped is a leaf too.
	var drop []string

	for changed := true; changed; {
		changed = false

		for key, l := range links {
			if l.Child != "" && (!now.After(l.NotAfter) || fanout[l.Child] > 0) {
				continue
			}

			drop = append(drop, key)
			delete(links, key)
			fanout[l.Parent]--
			changed = true
		}
	}

	n := 0

	for _, key := range drop {
		del, err := s.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", mods[key])).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return n, unavailable(err)
		}

		if del.Succeeded {
			n++
		}
	}

	return n, nil
}
