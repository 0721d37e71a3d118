package resourceapi

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cosi-project/runtime/pkg/resource"
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
// in etcd at each of its heartbeats; a worker, which runs no etcd, has
// none.
func (s *State) SetMembers(members []MemberInfo) error {
	ids := map[resource.ID]bool{}

	var errs []error

	for _, m := range members {
		addrs := make([]netip.Addr, 0, len(m.Addresses))

		for _, a := range m.Addresses {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				errs = append(errs, fmt.Errorf("resourceapi: member %s: address %q: %w", m.Hostname, a, err))

				continue
			}

			addrs = append(addrs, addr)
		}

		typ := machine.TypeWorker
		if m.ControlPlane {
			typ = machine.TypeControlPlane
		}

		ids[m.Hostname] = true

		errs = append(errs, set(s, cluster.NewMember(cluster.NamespaceName, m.Hostname), func(r *cluster.Member) {
			*r.TypedSpec() = cluster.MemberSpec{
				NodeID: m.Hostname, Addresses: addrs, Hostname: m.Hostname, MachineType: typ,
				OperatingSystem: "Aegis " + m.Version,
			}
		}))
	}

	errs = append(errs, s.keep(cluster.NamespaceName, cluster.MemberType, ids))

	return errors.Join(errs...)
}
