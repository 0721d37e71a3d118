package namestore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/etcdutil"
)

// Holder is a node that holds a live certificate of the cluster.
type Holder struct {
	// Name is the node's name: an etcd member's, or a bound name. A
	// control plane added to etcd but not started yet has none.
	Name string
	// Addresses are a control plane's etcd peer and client addresses, or
	// those a worker's name is bound to.
	Addresses []netip.Addr
	// ControlPlane marks etcd's members.
	ControlPlane bool
	// NotAfter is when a worker's certificate expires; zero for a control
	// plane, which holds its certificates while it is etcd's member.
	NotAfter time.Time
}

// Holders returns the nodes that hold live certificates of the cluster,
// sorted by name: etcd's members, and the names bound until a time still
// to come. Both reads are linearizable, so a control plane without quorum
// answers an error, never a short list; so does a record larger than
// maxHolders.
func (s *Store) Holders(ctx context.Context) ([]Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	out, err := s.etcdMembers(ctx)
	if err != nil {
		return nil, err
	}

	now := s.cfg.Clock.Now()

	var damaged error

	_, err = etcdutil.Scan(ctx, s.cfg.Client, s.cfg.Prefix, holdersPage, maxHolders, func(kv *mvccpb.KeyValue) {
		name := strings.TrimPrefix(string(kv.Key), s.cfg.Prefix)

		var b binding
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			// Damage is not a free name (read's rule): it is an error here too.
			damaged = errors.Join(damaged, fmt.Errorf("namestore: the binding of %s does not parse: %w", name, err))

			return
		}

		if now.Before(b.NotAfter) {
			out = append(out, Holder{Name: name, Addresses: b.Addresses, NotAfter: b.NotAfter})
		}
	})

	switch {
	case errors.Is(err, etcdutil.ErrTooMany):
		return nil, fmt.Errorf("namestore: more than %d bindings", maxHolders)
	case err != nil:
		return nil, fmt.Errorf("namestore: reading the bindings: %w", err)
	case damaged != nil:
		return nil, damaged
	}

	slices.SortStableFunc(out, func(a, b Holder) int { return cmp.Compare(a.Name, b.Name) })

	return out, nil
}

// etcdMembers are the control planes, etcd's members, with the addresses
// of their peer and client URLs.
func (s *Store) etcdMembers(ctx context.Context) ([]Holder, error) {
	resp, err := s.cfg.Client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("namestore: etcd members: %w", err)
	}

	out := make([]Holder, 0, len(resp.Members))

	for _, m := range resp.Members {
		h := Holder{ControlPlane: true}
		if m.Name != "" {
			h.Name = ca.CanonicalName(m.Name)
		}

		for _, u := range append(slices.Clone(m.PeerURLs), m.ClientURLs...) {
			if a, ok := urlAddress(u); ok && !slices.Contains(h.Addresses, a) {
				h.Addresses = append(h.Addresses, a)
			}
		}

		out = append(out, h)
	}

	return out, nil
}

// urlAddress is the IP address of an etcd URL's host, if it names one.
func urlAddress(raw string) (netip.Addr, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return netip.Addr{}, false
	}

	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return netip.Addr{}, false
	}

	return a.Unmap().WithZone(""), true
}
