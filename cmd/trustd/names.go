package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// openNames keeps the record of node names in the cluster's etcd, beside
// the token store, when this control plane runs etcd.
func (d *daemon) openNames(members *membership.Store, formed func() bool) error {
	if d.etcd == nil {
		return nil
	}

	store, err := namestore.New(namestore.Config{Client: d.etcd, Members: memberEntries(members)})
	if err != nil {
		return err
	}

	d.names = &formedNames{store: store, formed: formed}

	return nil
}

// recordOfNames is the record trustd checks names against: none without
// etcd.
func (d *daemon) recordOfNames() trustd.Names {
	if d.names == nil {
		return nil
	}

	return d.names
}

// memberEntries reads the member list as the names' record needs it.
func memberEntries(members *membership.Store) func(ctx context.Context) ([]namestore.Entry, error) {
	return func(ctx context.Context) ([]namestore.Entry, error) {
		list, err := members.List(ctx)
		if err != nil {
			return nil, err
		}

		out := make([]namestore.Entry, 0, len(list))

		for _, m := range list {
			e := namestore.Entry{Name: m.GetHostname(), ControlPlane: m.GetRole() == membership.RoleControlPlane}

			for _, a := range m.GetAddresses() {
				if addr, err := netip.ParseAddr(a); err == nil {
					e.Addresses = append(e.Addresses, addr)
				}
			}

			out = append(out, e)
		}

		return out, nil
	}
}

// formedNames keeps no record before the local etcd member is part of a
// formed cluster, as the token store keeps its tokens in bbolt until then:
// there is no shared state yet, a name is checked against the reserved set
// alone, and a node that joined then is protected from the formation on by
// its member entry and bound at its first heartbeat. Asking an etcd that
// does not answer yet would only cost every join before the bootstrap the
// record's timeout. From the formation on, it fails closed.
type formedNames struct {
	store  *namestore.Store
	formed func() bool
}

// followHolders makes the addresses of the name bindings known to trustd's
// listener (namestore.Store.FollowHolders), once the local etcd member is
// part of a formed cluster: nodes any trustd signed for are then known at
// this one before their first heartbeat lists them as members.
func (f formedNames) followHolders(ctx context.Context, log *slog.Logger, know func(netip.Addr)) {
	for !f.formed() {
		if !clock.Sleep(ctx, clock.Real(), formedPoll) {
			return
		}
	}

	f.store.FollowHolders(ctx, log, know)
}

// formedPoll is how often followHolders looks whether the local etcd
// member joined a formed cluster: the bindings are written only from then.
const formedPoll = time.Second

func (f formedNames) ControlPlaneNames(ctx context.Context) ([]string, error) {
	if !f.formed() {
		return nil, nil
	}

	return f.store.ControlPlaneNames(ctx)
}

func (f formedNames) Check(ctx context.Context, name string, source netip.Addr) error {
	if !f.formed() {
		return nil
	}

	return f.store.Check(ctx, name, source)
}

func (f formedNames) Bind(ctx context.Context, b trustd.Binding) error {
	if !f.formed() {
		return nil
	}

	return f.store.Bind(ctx, b)
}

// proven records the name a worker's heartbeat proves with its node
// certificate (membership.ServerConfig.Names): a name another node's live
// certificate carries is refused as not the caller's.
func (f formedNames) proven(ctx context.Context, hostname string, addresses []string, notAfter time.Time) error {
	b := trustd.Binding{Name: hostname, NotAfter: notAfter}

	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return err
		}

		b.Addresses = append(b.Addresses, addr)
	}

	b.Source = b.Addresses[0]

	// A worker that took a name before a control plane of that name
	// joined loses it: its heartbeats are refused, and its entry ages out.
	cps, err := f.ControlPlaneNames(ctx)
	if err != nil {
		return err
	}

	if slices.Contains(cps, hostname) {
		return fmt.Errorf("%w: %s is a control plane's name", membership.ErrNotOwner, hostname)
	}

	if !f.formed() {
		return nil
	}

	err = f.store.Ensure(ctx, b)
	if errors.Is(err, trustd.ErrNameHeld) {
		return errors.Join(membership.ErrNotOwner, err)
	}

	return err
}

// release frees the names a leaving worker's certificate proves
// (membership.ServerConfig.Release), each where it is bound to that
// certificate's addresses alone.
func (f formedNames) release(ctx context.Context, names, addresses []string) error {
	addrs := make([]netip.Addr, 0, len(addresses))

	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return err
		}

		addrs = append(addrs, addr)
	}

	if !f.formed() {
		return nil
	}

	var errs []error
	for _, name := range names {
		errs = append(errs, f.store.Release(ctx, name, addrs))
	}

	return errors.Join(errs...)
}
