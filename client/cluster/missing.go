// Package cluster holds the checks a client makes of the whole cluster
// before a cluster-wide procedure (a CA or token rotation) changes it: the
// procedure walks the member list, so every node that holds a live
// certificate of the cluster must be in it, or the procedure would leave
// that node behind. The checks are pure functions of the replies of the
// membership API; the package imports no server package.
package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aegis-os/aegis/api/membership"
)

// Roles of a certified node, as the membership API names them.
const (
	RoleControlPlane = "controlplane"
	RoleWorker       = "worker"
)

// ErrMissing: a node that holds a live certificate of the cluster is not
// in the member list.
var ErrMissing = errors.New("cluster: a node that holds a live certificate of the cluster is not a member")

// ErrUnknown: the member list or the certified nodes could not be read,
// so whether a node is missing is not known.
var ErrUnknown = errors.New("cluster: the nodes of the cluster are not known")

// MissingNode is a node that holds a live certificate of the cluster but
// is not in the member list: gone, or unreachable.
type MissingNode struct {
	// Node is the node as the certified list has it.
	Node *membership.CertifiedNode
	// Message names the node, its addresses and until when its
	// certificate lives, and says what to do.
	Message string
}

// Missing returns the certified nodes that no member matches, by hostname
// or by any address, in the certified list's order.
func Missing(members *membership.Members, certified *membership.CertifiedNodes) []MissingNode {
	var out []MissingNode

	for _, c := range certified.GetNodes() {
		if !slices.ContainsFunc(members.GetMembers(), func(m *membership.Member) bool { return matches(m, c) }) {
			out = append(out, MissingNode{Node: c, Message: message(c)})
		}
	}

	return out
}

// Check is nil when every certified node is a member. Otherwise it wraps
// ErrMissing with one line per missing node, or ErrUnknown when either
// reply carries a node's error or no node holds a certificate: a
// procedure fails closed on both.
func Check(members *membership.Members, certified *membership.CertifiedNodes) error {
	if e := members.GetMetadata().GetError(); e != "" {
		return fmt.Errorf("%w: reading the member list: %s", ErrUnknown, e)
	}

	if e := certified.GetMetadata().GetError(); e != "" {
		return fmt.Errorf("%w: reading the nodes that hold certificates: %s", ErrUnknown, e)
	}

	// A cluster has a control plane at least: an empty reply is no answer.
	if len(certified.GetNodes()) == 0 {
		return fmt.Errorf("%w: no node holds a certificate, by the reply: not even a control plane", ErrUnknown)
	}

	missing := Missing(members, certified)
	if len(missing) == 0 {
		return nil
	}

	lines := make([]string, 0, len(missing))
	for _, m := range missing {
		lines = append(lines, m.Message)
	}

	return fmt.Errorf("%w:\n  %s", ErrMissing, strings.Join(lines, "\n  "))
}

// matches reports whether member m is certified node c: the same
// hostname, or an address in common.
func matches(m *membership.Member, c *membership.CertifiedNode) bool {
	if c.GetHostname() != "" && m.GetHostname() == c.GetHostname() {
		return true
	}

	return slices.ContainsFunc(c.GetAddresses(), func(a string) bool { return slices.Contains(m.GetAddresses(), a) })
}

// message says which node is missing and what to do about it.
func message(c *membership.CertifiedNode) string {
	name := c.GetHostname()
	if name == "" && len(c.GetAddresses()) > 0 {
		name = c.GetAddresses()[0]
	}

	addresses := strings.Join(c.GetAddresses(), ", ")

	if c.GetRole() == RoleControlPlane {
		return fmt.Sprintf("control plane %s (%s) is etcd's member but not in the member list: "+
			"bring it back, or remove it from etcd with `aegisctl etcd remove-member`", name, addresses)
	}

	until := "a time not known"
	if c.GetNotAfter() != nil {
		until = c.GetNotAfter().AsTime().UTC().Format(time.RFC3339)
	}

	return fmt.Sprintf("%s %s (%s) holds a certificate of the cluster until %s but is not in the member list (gone, or unreachable): "+
		"bring it back, or remove it with `aegisctl members remove %s`", c.GetRole(), name, addresses, until, name)
}
