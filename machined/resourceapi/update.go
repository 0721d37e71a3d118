package resourceapi

import (
	"errors"
	"fmt"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"net/netip"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
)

// Condition is an unmet condition of the machine status.
type Condition struct{ Name, Reason string }

// SetMachineStatus sets MachineStatuses/machine: the boot stage, whether the
// node is ready, and what it waits for. The API's stages and Talos's
// resource stages are the same enumeration.
func (s *State) SetMachineStatus(stage machine.MachineStatusEvent_MachineStage, ready bool, unmet []Condition) error {
	return set(s, runtime.NewMachineStatus(), func(r *runtime.MachineStatus) {
		spec := r.TypedSpec()
		spec.Stage = runtime.MachineStage(stage)
		spec.Status.Ready = ready
		spec.Status.UnmetConditions = nil

		for _, c := range unmet {
			spec.Status.UnmetConditions = append(spec.Status.UnmetConditions, runtime.UnmetCondition{Name: c.Name, Reason: c.Reason})
		}
	})
}

// ServiceState is one service as the Services resource shows it.
type ServiceState struct {
	ID                        string
	Running, Healthy, Unknown bool
}

// SetServices makes Services hold exactly svcs.
func (s *State) SetServices(svcs []ServiceState) error {
	ids := map[resource.ID]bool{}

	var errs []error

	for _, svc := range svcs {
		ids[svc.ID] = true

		errs = append(errs, set(s, v1alpha1.NewService(svc.ID), func(r *v1alpha1.Service) {
			*r.TypedSpec() = v1alpha1.ServiceSpec{Running: svc.Running, Healthy: svc.Healthy, Unknown: svc.Unknown}
		}))
	}

	errs = append(errs, s.keep(v1alpha1.NamespaceName, v1alpha1.ServiceType, ids))

	return errors.Join(errs...)
}

// SetTime sets TimeStatuses/node (Talos's view: synced, sync disabled for a
// trusted host clock) and NTPStatuses/node (against what, by how much).
func (s *State) SetTime(ntp resourcetypes.NTPStatusSpec) error {
	return errors.Join(
		set(s, timeres.NewStatus(), func(r *timeres.Status) {
			spec := r.TypedSpec()
			spec.Synced, spec.SyncDisabled = ntp.Synced, ntp.TrustHostClock
		}),
		set(s, resourcetypes.NewNTPStatus(), func(r *resourcetypes.NTPStatus) { *r.TypedSpec() = ntp.DeepCopy() }),
	)
}

// SetIdentity sets the node's hostname (HostnameStatuses/hostname, and
// PlatformMetadatas/platformmetadata's), its name (Nodenames/nodename: the
// hostname, as Talos names nodes) and its addresses (NodeAddresses/default:
// the first, current: all, each as a single-address prefix since the node
// knows addresses, not networks).
func (s *State) SetIdentity(hostname string, addresses []string) error {
	var prefixes []netip.Prefix

	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("resourceapi: node address %q: %w", a, err)
		}

		prefixes = append(prefixes, netip.PrefixFrom(addr, addr.BitLen()))
	}

	def := prefixes
	if len(def) > 1 {
		def = def[:1]
	}

	return errors.Join(
		s.setPlatform(func(p *platform) { p.hostname = hostname }),
		set(s, network.NewHostnameStatus(network.NamespaceName, network.HostnameID), func(r *network.HostnameStatus) {
			r.TypedSpec().Hostname = hostname
		}),
		set(s, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID), func(r *k8s.Nodename) {
			r.TypedSpec().Nodename = hostname
		}),
		set(s, network.NewNodeAddress(network.NamespaceName, network.NodeAddressDefaultID), func(r *network.NodeAddress) {
			r.TypedSpec().Addresses = slices.Clone(def)
		}),
		set(s, network.NewNodeAddress(network.NamespaceName, network.NodeAddressCurrentID), func(r *network.NodeAddress) {
			r.TypedSpec().Addresses = slices.Clone(prefixes)
		}),
	)
}

// SetEtcdMember sets EtcdMembers/local to the local member's ID (16 hex digits, as
// `etcd members` prints it), or removes it when the node is no member.
func (s *State) SetEtcdMember(id uint64, member bool) error {
	if !member {
		return s.keep(etcd.NamespaceName, etcd.MemberType, nil)
	}

	return set(s, etcd.NewMember(etcd.NamespaceName, etcd.LocalMemberID), func(r *etcd.Member) {
		r.TypedSpec().MemberID = etcd.FormatMemberID(id)
	})
}
