package resourceapi

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
)

// MemberInfo is one node of the cluster's member list.
type MemberInfo struct {
	Hostname     string
	Addresses    []string
	ControlPlane bool
	// Version is the node's Aegis version.
	Version string
}

// ApplyMembers keeps Members (namespace cluster, Talos's type, so that
// `talosctl get members` reads it) the same as the cluster's member list,
// one resource per hostname, as Talos names its members. A control plane
// gives it the members of its etcd's list that came or changed (set) and
// the first addresses of those that left (removed), as it follows the
// list; a worker, which runs no etcd, has none. Members are keyed by their
// first address; when two claim one hostname (which the list refuses to
// record), the resource shows the one of the lowest address.
//
// It writes only the resources of the members named: with thousands of
// members, writing every one on every change (a read, a deep copy and a
// comparison of each resource) was half of a control plane's machined's
// CPU while workers joined. A resource whose write failed is written
// again at the next call. Nothing is applied from a member with a bad
// address; the rest are.
func (s *State) ApplyMembers(set []MemberInfo, removed []string) error {
	s.membersMu.Lock()
	defer s.membersMu.Unlock()

	if s.members == nil {
		s.members, s.holders, s.shown, s.unwritten = map[string]MemberInfo{}, map[string][]string{}, map[string]MemberInfo{}, map[string]bool{}
	}

	var errs []error

	hosts := s.unwritten
	s.unwritten = map[string]bool{}

	for _, addr := range removed {
		if prev, ok := s.members[addr]; ok {
			s.dropMember(addr, prev)
			hosts[prev.Hostname] = true
		}
	}

	for _, m := range set {
		if err := checkMember(m); err != nil {
			errs = append(errs, err)

			continue
		}

		addr := m.Addresses[0]
		if prev, ok := s.members[addr]; ok {
			s.dropMember(addr, prev)
			hosts[prev.Hostname] = true
		}

		s.members[addr] = m
		s.holders[m.Hostname] = append(s.holders[m.Hostname], addr)
		hosts[m.Hostname] = true
	}

	for host := range hosts {
		if err := s.showMember(host); err != nil {
			s.unwritten[host] = true
			errs = append(errs, err)
		}
	}

	return errors.Join(errs...)
}

// dropMember forgets the member at addr.
func (s *State) dropMember(addr string, m MemberInfo) {
	delete(s.members, addr)

	s.holders[m.Hostname] = slices.DeleteFunc(s.holders[m.Hostname], func(a string) bool { return a == addr })
	if len(s.holders[m.Hostname]) == 0 {
		delete(s.holders, m.Hostname)
	}
}

// showMember makes the resource of host show its member, or destroys it
// when none holds host any more.
func (s *State) showMember(host string) error {
	addrs := s.holders[host]
	if len(addrs) == 0 {
		delete(s.shown, host)

		return s.destroy(cluster.NewMember(cluster.NamespaceName, host).Metadata())
	}

	m := s.members[slices.Min(addrs)]
	if prev, ok := s.shown[host]; ok && sameInfo(prev, m) {
		return nil
	}

	delete(s.shown, host)

	if err := s.setMember(m); err != nil {
		return err
	}

	s.shown[host] = m

	return nil
}

// checkMember refuses a member without a hostname or a parsable address.
func checkMember(m MemberInfo) error {
	if m.Hostname == "" || len(m.Addresses) == 0 {
		return fmt.Errorf("resourceapi: member %q without a hostname or an address", m.Hostname)
	}

	for _, a := range m.Addresses {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("resourceapi: member %s: address %q: %w", m.Hostname, a, err)
		}
	}

	return nil
}

// setMember writes the resource of one member.
func (s *State) setMember(m MemberInfo) error {
	addrs := make([]netip.Addr, 0, len(m.Addresses))

	for _, a := range m.Addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("resourceapi: member %s: address %q: %w", m.Hostname, a, err)
		}

		addrs = append(addrs, addr)
	}

	typ := machine.TypeWorker
	if m.ControlPlane {
		typ = machine.TypeControlPlane
	}

	return set(s, cluster.NewMember(cluster.NamespaceName, m.Hostname), func(r *cluster.Member) {
		*r.TypedSpec() = cluster.MemberSpec{
			NodeID: m.Hostname, Addresses: addrs, Hostname: m.Hostname, MachineType: typ,
			OperatingSystem: "Aegis " + m.Version,
		}
	})
}

// sameInfo reports whether a and b make the same resource.
func sameInfo(a, b MemberInfo) bool {
	return a.Hostname == b.Hostname && a.ControlPlane == b.ControlPlane && a.Version == b.Version &&
		slices.Equal(a.Addresses, b.Addresses)
}
