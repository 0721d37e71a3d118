package node

import (
	"context"
	"fmt"
	"net/netip"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// certifiedRecord answers, from a control plane's etcd, which nodes hold
// live certificates of the cluster (trustd's record of names and etcd's
// members), and takes a node that is gone out of the member list and the
// record (MembershipService's Certified and Remove).
type certifiedRecord struct {
	// client is the node's etcd client, or membership.ErrNoEtcd.
	client func() (*clientv3.Client, error)
	clock  clock.Clock
}

// certifiedRecordOf is n's record, read through its etcd.
func certifiedRecordOf(n *Node) certifiedRecord {
	return certifiedRecord{
		client: func() (*clientv3.Client, error) {
			return n.etcd.client(membership.ErrNoEtcd, membership.ErrUnavailable)
		},
		clock: n.clock,
	}
}

func (r certifiedRecord) names() (*namestore.Store, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}

	return namestore.New(namestore.Config{Client: cli, Clock: r.clock})
}

// Certified lists the holders of live certificates (membership.ServerConfig.Certified).
func (r certifiedRecord) Certified(ctx context.Context) ([]*membership.CertifiedNode, error) {
	names, err := r.names()
	if err != nil {
		return nil, err
	}

	holders, err := names.Holders(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", membership.ErrUnavailable, err)
	}

	out := make([]*membership.CertifiedNode, 0, len(holders))

	for _, h := range holders {
		c := &membership.CertifiedNode{Hostname: h.Name, Role: membership.RoleWorker}
		if h.ControlPlane {
			c.Role = membership.RoleControlPlane
		} else {
			c.NotAfter = timestamppb.New(h.NotAfter)
		}

		for _, a := range h.Addresses {
			c.Addresses = append(c.Addresses, a.String())
		}

		out = append(out, c)
	}

	return out, nil
}

// RemoveEntries deletes a gone worker's aged-out entries
// (membership.ServerConfig.RemoveEntries).
func (r certifiedRecord) RemoveEntries(ctx context.Context, node string) ([]*membership.Member, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}

	store, err := membership.New(membership.Config{Client: cli, Clock: r.clock})
	if err != nil {
		return nil, err
	}

	return store.Remove(ctx, node)
}

// Release frees names where they are bound to addresses alone
// (membership.ServerConfig.Release).
func (r certifiedRecord) Release(ctx context.Context, names, addresses []string) error {
	store, err := r.names()
	if err != nil {
		return err
	}

	addrs := make([]netip.Addr, 0, len(addresses))

	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("%w: %w", membership.ErrInvalid, err)
		}

		addrs = append(addrs, addr)
	}

	for _, name := range names {
		if err := store.Release(ctx, name, addrs); err != nil {
			return err
		}
	}

	return nil
}
