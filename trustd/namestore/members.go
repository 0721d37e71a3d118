package namestore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aegis-os/aegis/ca"
)

// followedMembers is the member list as the node follows it
// (KnowMembers): each entry by its first address, and the first addresses
// of the entries that hold each canonical name. Until a whole list came,
// known is false and the list is read from etcd.
type followedMembers struct {
	known   bool
	entries map[netip.Addr]Entry
	holders map[string][]netip.Addr
	cps     int // the entries of control planes
	// gen counts the changes to the control planes' entries: a read of
	// their names that began before one is not reused.
	gen uint64
}

// set records e under its first address a, in place of what was there,
// and reports whether a control plane's entry changed.
func (f *followedMembers) set(a netip.Addr, e Entry) bool {
	e.Name = ca.CanonicalName(e.Name)

	old, was := f.entries[a]
	if was && old.Name == e.Name && old.ControlPlane == e.ControlPlane {
		return false
	}

	f.remove(a)

	f.entries[a] = e
	f.holders[e.Name] = append(f.holders[e.Name], a)

	if e.ControlPlane {
		f.cps++
	}

	return e.ControlPlane || old.ControlPlane
}

// remove forgets the entry under a, and reports whether it was a control
// plane's.
func (f *followedMembers) remove(a netip.Addr) bool {
	e, was := f.entries[a]
	if !was {
		return false
	}

	delete(f.entries, a)

	if rest := slices.DeleteFunc(f.holders[e.Name], func(h netip.Addr) bool { return h == a }); len(rest) > 0 {
		f.holders[e.Name] = rest
	} else {
		delete(f.holders, e.Name)
	}

	if e.ControlPlane {
		f.cps--
	}

	return e.ControlPlane
}

// usable reports whether the list followed can be believed: a whole list
// came, and it holds a control plane. The list a control plane's trustd
// follows holds that control plane's own entry once its sender has read
// the list, so one without any is a list its sender has not read yet.
func (f *followedMembers) usable() bool { return f.known && f.cps > 0 }

// KnowMembers applies a change of the member list as the node follows it:
// full says set is the whole list, which replaces what was known; else set
// are entries written and removed the first addresses of entries gone.
// Each entry is known by its first address alone. From the first whole
// list on, the control planes' names, and whether another node's entry
// holds a name, are answered from what was applied instead of a read of
// every entry: at 10,000 members some 2 MiB, every controlPlanesFresh on
// every trustd, and at every join that asks for a name. Changes before the
// first whole list are ignored. A control plane that joins or leaves is
// known at once: the names are read again at the next call.
//
// The list followed is as fresh as its sender keeps it: after a broken
// stream the sender starts again with the whole list. Every control plane
// is an etcd member too, named by etcd's member list, which is still read.
func (s *Store) KnowMembers(full bool, set []Entry, removed []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()

	f := &s.members

	if full {
		f.known, f.cps = true, 0
		f.entries, f.holders = map[netip.Addr]Entry{}, map[string][]netip.Addr{}
	}

	if !f.known {
		return
	}

	changed := full

	for _, e := range set {
		if len(e.Addresses) > 0 && f.set(e.Addresses[0], Entry{Name: e.Name, ControlPlane: e.ControlPlane}) {
			changed = true
		}
	}

	for _, a := range removed {
		if f.remove(a) {
			changed = true
		}
	}

	if changed {
		f.gen++
		s.cpsExpires = time.Time{}
	}
}

// followedNames returns the control planes' names as followed, and whether
// the list followed is usable.
func (s *Store) followedNames() ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if !s.members.usable() {
		return nil, false
	}

	names := make([]string, 0, s.members.cps)

	for _, e := range s.members.entries {
		if e.ControlPlane {
			names = append(names, e.Name)
		}
	}

	return names, true
}

// listedFree reports whether the list followed shows name held by no entry
// but one whose first address is source: then no other live entry holds
// it, and no read is needed. False means the list must be read: it is not
// usable, or an entry holds the name at another first address (source may
// be another of that entry's addresses).
func (s *Store) listedFree(name string, source netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	if !s.members.usable() {
		return false
	}

	for _, a := range s.members.holders[name] {
		if a != source {
			return false
		}
	}

	return true
}

// ControlPlaneNames returns the names of etcd's members and of the
// control planes' entries of the member list, canonical, as read at most
// controlPlanesFresh ago: every worker heartbeat asks. Once they are due,
// one read is made for every caller; the others meanwhile get them as
// last read, not a wait behind that read, and wait for it, each up to its
// own deadline, only when nothing was read yet. The read runs on a
// context of its own (readControlPlaneNames bounds it), so the caller
// that began it giving up does not end it for the others.
func (s *Store) ControlPlaneNames(ctx context.Context) ([]string, error) {
	s.mu.Lock()

	if s.cfg.Clock.Now().Before(s.cpsExpires) || s.cpsRead != nil && s.cps != nil {
		names := slices.Clone(s.cps)
		s.mu.Unlock()

		return names, nil
	}

	r := s.cpsRead
	if r == nil {
		r = &cpsRead{done: make(chan struct{})}
		s.cpsRead = r

		go s.readControlPlanes(r, s.members.gen)
	}

	s.mu.Unlock()

	select {
	case <-r.done:
		return slices.Clone(r.names), r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("namestore: etcd members: %w", ctx.Err())
	}
}

// cpsRead is a read of the control planes' names under way: done is
// closed once names and err are set.
type cpsRead struct {
	done  chan struct{}
	names []string
	err   error
}

// readControlPlanes makes the read r stands for, and keeps what it read
// unless it failed. gen is the count of changes to the followed control
// planes' entries when it began: a change followed during the read is
// read at the next call.
func (s *Store) readControlPlanes(r *cpsRead, gen uint64) {
	names, err := s.readControlPlaneNames(context.Background())

	s.mu.Lock()
	defer s.mu.Unlock()

	s.cpsRead = nil

	if err == nil {
		s.cps = names

		if gen == s.members.gen {
			s.cpsExpires = s.cfg.Clock.Now().Add(controlPlanesFresh)
		}
	}

	r.names, r.err = names, err
	close(r.done)
}

// readControlPlaneNames reads etcd's members, and the control planes'
// entries of the member list unless they are followed.
func (s *Store) readControlPlaneNames(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	resp, err := s.cfg.Client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("namestore: etcd members: %w", err)
	}

	var out []string

	for _, m := range resp.Members {
		// A member added but not started yet has no name.
		if m.Name != "" {
			out = append(out, ca.CanonicalName(m.Name))
		}
	}

	if followed, ok := s.followedNames(); ok {
		return append(out, followed...), nil
	}

	entries, err := s.readMembers(ctx)
	if err != nil {
		return nil, err
	}

	for _, e := range entries {
		if e.ControlPlane {
			out = append(out, ca.CanonicalName(e.Name))
		}
	}

	return out, nil
}
