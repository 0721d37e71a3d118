package rollout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/cluster"
)

// Member is one node of the cluster as the membership list names it.
type Member struct {
	// Name is the node's hostname.
	Name string
	// Addr is its first address: where calls to it are routed.
	Addr string
	// Addrs are every address the list gives.
	Addrs []string
	// Role is the list's: controlplane, init or worker.
	Role string
}

// ControlPlane reports whether the list names the member other than a
// worker.
func (m Member) ControlPlane() bool { return m.Role != string(certs.NodeWorker) }

func (m Member) String() string {
	if m.Name == "" || m.Name == m.Addr {
		return m.Addr
	}

	return m.Name + " (" + m.Addr + ")"
}

// Members lists the cluster's members through the endpoint, but those in
// known (by name and address), control planes first, which a step changes
// before the workers that depend on them, each group by address. It is the
// one place a procedure learns who the members are, and so the place it
// learns whether it would leave a node behind: every node that holds a
// live certificate of the cluster (MembershipService/Certified) and that
// the procedure concerns (nil: every node) must be in the list, or Members
// refuses, naming each one that is not (cluster.ErrMissing).
func (w *Walker) Members(ctx context.Context, known []Member, concerns func(Member) bool) ([]Member, error) {
	svc := membership.NewMembershipServiceClient(w.client.Conn())

	resp, err := svc.List(ctx, &membership.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the members (the endpoint must be a control plane): %w", w.Check(nil, err))
	}

	if err = w.Check(resp, nil); err != nil {
		return nil, fmt.Errorf("listing the members: %w", err)
	}

	if err = w.complete(ctx, svc, resp, concerns); err != nil {
		return nil, err
	}

	var out []Member

	for _, list := range resp.GetMessages() {
		for _, mb := range list.GetMembers() {
			if len(mb.GetAddresses()) == 0 || slices.ContainsFunc(known, func(k Member) bool {
				return k.Name == mb.GetHostname() && k.Addr == mb.GetAddresses()[0]
			}) {
				continue
			}

			out = append(out, Member{Name: mb.GetHostname(), Addr: mb.GetAddresses()[0], Addrs: mb.GetAddresses(), Role: mb.GetRole()})
		}
	}

	slices.SortStableFunc(out, func(a, b Member) int {
		switch {
		case a.ControlPlane() == b.ControlPlane():
			return strings.Compare(a.Addr, b.Addr)
		case a.ControlPlane():
			return -1
		default:
			return 1
		}
	})

	return out, nil
}

// complete refuses when a node the procedure concerns holds a live
// certificate of the cluster but is not in the member list (gone, or
// unreachable for longer than its entry lives): the procedure would pass
// it over and leave it behind, unable to reach the others. An endpoint
// that cannot say which nodes hold certificates is refused too: the
// procedure fails closed rather than trust a list it cannot check.
func (w *Walker) complete(ctx context.Context, svc membership.MembershipServiceClient, list *membership.ListResponse, concerns func(Member) bool) error {
	resp, err := svc.Certified(ctx, &membership.CertifiedRequest{})
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: the endpoint does not say which nodes hold certificates of the cluster "+
			"(a control plane of an older Aegis): upgrade the control planes first", cluster.ErrUnknown)
	}

	if err == nil {
		err = w.Check(resp, nil)
	}

	if err != nil {
		return fmt.Errorf("listing the nodes that hold certificates of the cluster: %w", w.Check(nil, err))
	}

	members, all := firstOf(list.GetMessages()), firstOf(resp.GetMessages())
	if err = cluster.Check(members, all); err == nil || concerns == nil || !errors.Is(err, cluster.ErrMissing) {
		return err
	}

	// Some node is missing: refuse only for those the procedure changes.
	concerned := &membership.CertifiedNodes{Metadata: all.GetMetadata()}

	for _, n := range all.GetNodes() {
		if concerns(Member{Name: n.GetHostname(), Addrs: n.GetAddresses(), Role: n.GetRole()}) {
			concerned.Nodes = append(concerned.Nodes, n)
		}
	}

	if len(cluster.Missing(members, concerned)) == 0 {
		return nil
	}

	return cluster.Check(members, concerned)
}

// firstOf is the reply of the endpoint itself: a call without `nodes`
// metadata has one.
func firstOf[M any](messages []*M) *M {
	if len(messages) == 0 {
		return nil
	}

	return messages[0]
}

// ErrNoControlPlane refuses a member list that names no control plane.
var ErrNoControlPlane = errors.New("the cluster's member list names no control plane yet (a node just started?): try again in a moment")

// Unlisted are the hosts of the control-plane endpoints of configs
// (cluster.controlPlane.endpoints) that no member has as its name or
// address: a control plane not registered yet, which a procedure would
// pass over while nodes go on joining through it.
func Unlisted(members []Member, configs []*certs.MachineConfig) []string {
	known := map[string]bool{}

	for _, m := range members {
		known[m.Name] = true

		for _, a := range m.Addrs {
			known[a] = true
		}
	}

	var out []string

	for _, cfg := range configs {
		if cfg == nil {
			continue
		}

		for _, ep := range cfg.Cluster.ControlPlane.Endpoints {
			host := ep
			if h, _, err := net.SplitHostPort(ep); err == nil {
				host = h
			}

			if !known[host] {
				known[host] = true
				out = append(out, host)
			}
		}
	}

	return out
}
