package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/logkey"
)

// CertifiedNode is a node that holds a live certificate of the cluster.
type CertifiedNode = membership.CertifiedNode

// msgRemoved is the audit line of a node taken out of the cluster.
const msgRemoved = "membership: node removed from the cluster"

// Certified returns the nodes that hold live certificates of the cluster,
// as this control plane's etcd knows them.
func (s *Server) Certified(ctx context.Context, _ *membership.CertifiedRequest) (*membership.CertifiedResponse, error) {
	nodes, err := s.certified(ctx)
	if err != nil {
		return nil, s.toStatus("certified", err)
	}

	return &membership.CertifiedResponse{Messages: []*membership.CertifiedNodes{{Nodes: nodes}}}, nil
}

// certified lists the certified nodes, sorted by hostname. A failure other
// than ErrNoEtcd is taken for etcd's.
func (s *Server) certified(ctx context.Context) ([]*CertifiedNode, error) {
	if s.cfg.Certified == nil {
		return nil, ErrNoEtcd
	}

	nodes, err := s.cfg.Certified(ctx)

	switch {
	case errors.Is(err, ErrNoEtcd), errors.Is(err, ErrUnavailable):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: reading the certified nodes: %w", ErrUnavailable, err)
	}

	slices.SortFunc(nodes, func(a, b *CertifiedNode) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })

	return nodes, nil
}

// Remove takes a worker that is gone out of the cluster: its aged-out
// entry is deleted and its name released, so that a node that replaces it
// may take the name. A control plane, or a node whose entry is live, is
// refused and nothing changes.
func (s *Server) Remove(ctx context.Context, req *membership.RemoveRequest) (*membership.RemoveResponse, error) {
	if s.cfg.Certified == nil || s.cfg.RemoveEntries == nil || s.cfg.Release == nil {
		return nil, s.toStatus("remove", ErrNoEtcd)
	}

	node, err := canonicalNode(req.GetNode())
	if err != nil {
		return nil, s.toStatus("remove", err)
	}

	out, err := s.remove(ctx, node)
	if err != nil {
		return nil, s.toStatus("remove", err)
	}

	// apid names the caller on every call it passes to machined's socket,
	// which nobody else reaches.
	md, _ := metadata.FromIncomingContext(ctx)
	caller, _, _ := authz.CallerFromMetadata(md)

	s.cfg.Logger.Info(msgRemoved, slog.String(logkey.Node, out.GetHostname()),
		slog.String(logkey.Addresses, strings.Join(out.GetAddresses(), ",")),
		slog.Bool(logkey.EntryDeleted, out.GetEntryDeleted()), slog.Bool(logkey.NameReleased, out.GetNameReleased()),
		slog.String(logkey.CallerSerial, caller.Serial), slog.String(logkey.CallerSubject, caller.Subject))

	return &membership.RemoveResponse{Messages: []*membership.Removed{out}}, nil
}

// remove refuses a control plane, deletes node's aged-out entries (which
// refuses a live one), then releases the names of the workers it names.
func (s *Server) remove(ctx context.Context, node string) (*membership.Removed, error) {
	nodes, err := s.certified(ctx)
	if err != nil {
		return nil, err
	}

	held := matching(nodes, node)
	for _, c := range held {
		if c.GetRole() == RoleControlPlane {
			return nil, fmt.Errorf("%w: %s is a control plane; it leaves the cluster through etcd's member removal "+
				"(aegisctl etcd remove-member, or a reset of the node)", ErrControlPlane, describe(c.GetHostname(), c.GetAddresses()))
		}
	}

	entries, err := s.cfg.RemoveEntries(ctx, node)
	if err != nil {
		return nil, err
	}

	if len(entries) == 0 && len(held) == 0 {
		return nil, fmt.Errorf("%w: no node %s holds a live certificate or a member entry", ErrNotFound, node)
	}

	out := &membership.Removed{Hostname: node, EntryDeleted: len(entries) > 0}
	for _, e := range entries {
		out.Hostname, out.Addresses = e.GetHostname(), union(out.Addresses, e.GetAddresses())
	}

	for _, c := range held {
		if err := s.cfg.Release(ctx, []string{c.GetHostname()}, c.GetAddresses()); err != nil {
			return nil, fmt.Errorf("%w: releasing the name %s: %w", ErrUnavailable, c.GetHostname(), err)
		}

		out.Hostname, out.Addresses, out.NameReleased = c.GetHostname(), union(out.Addresses, c.GetAddresses()), true
	}

	return out, s.checkReleased(ctx, out)
}

// checkReleased refuses to say a name was released when a certificate
// still binds it: the node renewed or sent a heartbeat meanwhile, so it is
// not gone.
func (s *Server) checkReleased(ctx context.Context, out *membership.Removed) error {
	if !out.GetNameReleased() {
		return nil
	}

	nodes, err := s.certified(ctx)
	if err != nil {
		return err
	}

	if again := matching(nodes, out.GetHostname()); len(again) > 0 {
		return fmt.Errorf("%w: %s holds its name again: it renewed its certificate or sent a heartbeat meanwhile; "+
			"stop or reset it first", ErrAlive, describe(again[0].GetHostname(), again[0].GetAddresses()))
	}

	return nil
}

// canonicalNode is node, a hostname or an address, in the form entries
// and bindings keep it.
func canonicalNode(node string) (string, error) {
	if a, err := netip.ParseAddr(node); err == nil {
		return a.Unmap().WithZone("").String(), nil
	}

	if err := ca.CheckDNSName(node); err != nil {
		return "", fmt.Errorf("%w: %q is neither a hostname nor an IP address: %v", ErrInvalid, node, err)
	}

	return ca.CanonicalName(node), nil
}

// matching returns the nodes whose hostname is node or whose addresses
// hold it.
func matching(nodes []*CertifiedNode, node string) []*CertifiedNode {
	var out []*CertifiedNode

	for _, n := range nodes {
		if n.GetHostname() == node || slices.Contains(n.GetAddresses(), node) {
			out = append(out, n)
		}
	}

	return out
}

// union is a with the elements of b it lacks.
func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}

	return a
}

// describe names a node in a message: its hostname and its addresses.
func describe(hostname string, addresses []string) string {
	return fmt.Sprintf("%s (%s)", hostname, strings.Join(addresses, ", "))
}
