// Package resourceapi is the node's resource API: the COSI
// cosi.resource.State service Talos clients read with `talosctl get`,
// read-only for them. Its resources are typed (Talos's machinery types
// where one fits, Aegis's own in the "aegis" namespace otherwise), listed
// with their definitions in the "meta" namespace so that clients resolve
// names and aliases, and written only by the node: each is set from the
// node's own state when that state changes.
package resourceapi

import (
	"context"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

// Owner writes every resource: a client cannot, and nothing else in the
// node writes them but through State.
const Owner = "machined"

// namespaces are the namespaces the node serves, with their descriptions.
var namespaces = []struct {
	name resource.Namespace
	desc string
}{
	{v1alpha1.NamespaceName, "The node's runtime: its services, machine status and time status."},
	{network.NamespaceName, "The node's names and addresses."},
	{k8s.NamespaceName, "The node's name as the cluster knows it."},
	{etcd.NamespaceName, "The node's etcd member (control planes)."},
	{cluster.NamespaceName, "The cluster's members, as a control plane's etcd keeps them."},
	{talosconfig.NamespaceName, "The node's machine config, as a Talos v1alpha1 view (redacted)."},
	{resourcetypes.NamespaceName, "Aegis: certificates, NTP status, the machine config (redacted), installed versions."},
}

// definitions are the resource types the node serves.
func definitions() []meta.ResourceWithRD {
	return []meta.ResourceWithRD{
		&runtime.MachineStatus{}, &v1alpha1.Service{}, &timeres.Status{},
		&runtime.Version{}, &runtime.PlatformMetadata{}, &runtime.SecurityState{}, &talosconfig.MachineConfig{},
		&network.HostnameStatus{}, &network.NodeAddress{}, &k8s.Nodename{}, &etcd.Member{}, &cluster.Member{},
		&resourcetypes.CertificateStatus{}, &resourcetypes.NTPStatus{}, &resourcetypes.MachineConfig{},
		&resourcetypes.UpgradeStatus{},
	}
}

// State holds the node's resources.
type State struct {
	// mu makes the node's writes one at a time: two writers of one
	// resource would otherwise conflict on its version.
	mu sync.Mutex
	st state.State

	// membersMu guards the member list as ApplyMembers keeps it: the
	// members by first address, the addresses holding each hostname, what
	// each hostname's resource shows, and the hostnames whose resource
	// failed to be written.
	membersMu sync.Mutex
	members   map[string]MemberInfo
	holders   map[string][]string
	shown     map[string]MemberInfo
	unwritten map[string]bool

	platform platform
}

// New returns a State holding the namespaces and resource definitions and
// no resources yet.
func New() (*State, error) {
	st := state.WrapCore(namespaced.NewState(inmem.Build))
	ctx := context.Background()

	if err := registry.NewNamespaceRegistry(st).RegisterDefault(ctx); err != nil {
		return nil, fmt.Errorf("resourceapi: %w", err)
	}

	if err := registry.NewResourceRegistry(st).RegisterDefault(ctx); err != nil {
		return nil, fmt.Errorf("resourceapi: %w", err)
	}

	for _, ns := range namespaces {
		if err := registry.NewNamespaceRegistry(st).Register(ctx, ns.name, ns.desc); err != nil {
			return nil, fmt.Errorf("resourceapi: namespace %s: %w", ns.name, err)
		}
	}

	for _, r := range definitions() {
		if err := registry.NewResourceRegistry(st).Register(ctx, r); err != nil {
			return nil, fmt.Errorf("resourceapi: %w", err)
		}
	}

	return &State{st: st}, nil
}

// Reader is the state as clients see it.
func (s *State) Reader() state.CoreState { return s.st }

// set creates r or updates it to what fill makes of it; an update that
// changes nothing is not made, so watchers see real changes only.
func set[R resource.Resource](s *State, r R, fill func(R)) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	err := s.st.Modify(context.Background(), r, func(cur resource.Resource) error {
		typed, ok := cur.(R)
		if !ok {
			return fmt.Errorf("resourceapi: %s is %T", cur.Metadata(), cur)
		}

		fill(typed)

		return nil
	}, state.WithUpdateOwner(Owner))
	if err != nil {
		return fmt.Errorf("resourceapi: setting %s: %w", r.Metadata(), err)
	}

	return nil
}

// destroy removes one resource, if it is there.
func (s *State) destroy(md *resource.Metadata) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	if err := s.st.Destroy(context.Background(), md, state.WithDestroyOwner(Owner)); err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("resourceapi: destroying %s: %w", md, err)
	}

	return nil
}

// keep destroys the resources of type typ in ns whose IDs are not in ids.
func (s *State) keep(ns resource.Namespace, typ resource.Type, ids map[resource.ID]bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	ctx := context.Background()

	list, err := s.st.List(ctx, resource.NewMetadata(ns, typ, "", resource.VersionUndefined))
	if err != nil {
		return fmt.Errorf("resourceapi: listing %s: %w", typ, err)
	}

	for _, r := range list.Items {
		if ids[r.Metadata().ID()] {
			continue
		}

		if err := s.st.Destroy(ctx, r.Metadata(), state.WithDestroyOwner(Owner)); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("resourceapi: destroying %s: %w", r.Metadata(), err)
		}
	}

	return nil
}
