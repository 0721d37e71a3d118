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

// SetMembers makes Members (namespace cluster, Talos's type, so that
// `talosctl get members` reads it) hold exactly members, by hostname, as
// Talos names its members. A control plane sets it from the member list
// in etcd each time what a reader sees of it changes; a worker, which runs
// no etcd, has none.
//
// Only the members that came, changed or left since the last call are
// written: with thousands of members, writing every one (a read, a deep
// copy and a comparison of each resource) on every change was half of a
// control plane's machined's CPU while workers joined. A member whose
// write failed is written again at the next call.
func (s *State) SetMembers(members []MemberInfo) error {
	s.membersMu.Lock()
	defer s.membersMu.Unlock()

	if s.members == nil {
		s.members = map[string]MemberInfo{}
	}

	seen := make(map[string]bool, len(members))

	var errs []error

	for _, m := range members {
		seen[m.Hostname] = true

		if prev, ok := s.members[m.Hostname]; ok && sameInfo(prev, m) {
			continue
		}

		delete(s.members, m.Hostname)

		if err := s.setMember(m); err != nil {
			errs = append(errs, err)

			continue
		}

		s.members[m.Hostname] = m
	}

	left := false

	for host := range s.members {
		if !seen[host] {
			delete(s.members, host)

			left = true
		}
	}

	// The resources of the members that left, and of any whose write
	// failed and may have left since, are looked for only then.
	if left || len(errs) > 0 {
		errs = append(errs, s.keep(cluster.NamespaceName, cluster.MemberType, seen))
	}

	return errors.Join(errs...)
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
