package apid

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/client/routing"
	"github.com/aegis-os/aegis/internal/wire"
)

// ErrBadRouting is returned for routing metadata apid cannot follow.
var ErrBadRouting = errors.New("apid: bad routing metadata")

type routeKind int

const (
	routeLocal routeKind = iota // no routing metadata: the local machined
	routeNode                   // `node`: one node, replies passed through
	routeNodes                  // `nodes`: all of them, replies merged and tagged
)

// route says where a call goes.
type route struct {
	kind    routeKind
	targets []target
}

// target is one node named in routing metadata.
type target struct {
	// name is the node's canonical name: an address as netip prints it
	// (IPv4-mapped IPv6 as IPv4) or a lowercase DNS name. Fan-out replies
	// carry it as their hostname and errors name the node by it.
	name string
	// addr is the host:port dialed: name on the API port, or a member's
	// address for a member's hostname.
	addr string
	// host is the name the node's server certificate must carry: the
	// address dialed, or a control-plane endpoint's DNS name.
	host string
	// memberName is, for a target named by a member's hostname, that
	// hostname: the certificate must name it as well as host, so that an
	// entry whose name or address another node holds reaches nobody.
	memberName string
	// role is the node's proven role (RoleControlPlane, RoleWorker), or
	// "" when nothing proves it.
	role string
	// local marks this node, served by the local machined.
	local bool
	// absent, for a target of a fan-out that is no node apid knows now,
	// is its refusal: the node's entry in the reply, and nothing dialed.
	absent *notMemberError
}

// Roles a node is proven to have, as membership entries and machine
// configs spell them.
const (
	RoleControlPlane = "controlplane"
	RoleWorker       = "worker"
)

// connKey identifies the connection a call to t goes through: a
// connection whose peer was checked for an address alone does not carry
// a call for a member's name, which needs the name checked too.
func (t target) connKey() string {
	return t.addr + " " + t.memberName
}

// key identifies the node a target reaches: every name of this node is one
// node, whatever spelling the caller used.
func (t target) key() string {
	if t.local {
		return ""
	}

	return t.addr
}

// Member is a live membership entry as apid routes to it.
type Member struct {
	// Hostname is canonical: lower case, no final dot.
	Hostname string
	// Address is the canonical address the member is reached at.
	Address string
	// Role is what the entry's writer proved: RoleControlPlane for an
	// entry a control plane wrote through etcd, RoleWorker for one
	// trustd's heartbeat server recorded.
	Role string
}

// MemberResolver finds the cluster's live members, by hostname (canonical)
// or by canonical address.
type MemberResolver interface {
	MemberByName(name string) (Member, bool)
	MemberByAddress(addr string) (Member, bool)
}

// notMemberError refuses a target apid does not know as a node of its
// cluster now: apid dials only nodes it knows, never a host of the
// caller's choosing. It is Unavailable, not InvalidArgument: membership
// changes, and apid cannot tell a host that will never be a node from a
// node that is restarting or rejoining (a reset node is out of the list
// until its next heartbeat), so a client waiting for a node retries.
type notMemberError struct {
	node string
}

func (e *notMemberError) Error() string {
	return fmt.Sprintf("apid: node %q is neither this node, a control-plane endpoint nor a live member: "+
		"nothing was sent to it; a node that is rejoining is a member again after its first heartbeat", e.node)
}

// nodeNames are the nodes apid accepts in `node`/`nodes`: this node by
// any of its names and addresses, a control-plane endpoint of its
// configuration (name or address), or a live cluster member by its
// hostname or address. Anything else is refused without a lookup or a
// dial, so a caller cannot make apid reach hosts of its choosing.
type nodeNames struct {
	// members resolves live members; nil knows none.
	members MemberResolver
	// port is the API port of every node.
	port int
	// self holds this node's canonical names and addresses.
	self map[string]bool
	// selfRole is this node's role, from its own configuration; "" is
	// unknown.
	selfRole string
	// others holds the control-plane endpoints: canonical names and
	// addresses.
	others map[string]bool
}

// parseRoute reads the routing metadata of an incoming call. `node` must
// hold one name; `nodes` holds one or more, as several values or
// comma-separated in one. Nodes are deduplicated after canonicalization,
// so a mutating call runs once per node however many spellings name it.
func (nn *nodeNames) parseRoute(md metadata.MD) (route, error) {
	node, hasNode := md[wire.MetadataNode]
	nodes, hasNodes := md[wire.MetadataNodes]

	switch {
	case hasNode && hasNodes:
		return route{}, fmt.Errorf("%w: both %q and %q given", ErrBadRouting, wire.MetadataNode, wire.MetadataNodes)
	case hasNode:
		if len(node) != 1 {
			return route{}, fmt.Errorf("%w: %q must have one value, has %d", ErrBadRouting, wire.MetadataNode, len(node))
		}

		t, err := nn.parseTarget(strings.TrimSpace(node[0]))
		if err != nil {
			return route{}, err
		}

		return route{kind: routeNode, targets: []target{t}}, nil
	case hasNodes:
		targets, err := nn.parseTargets(nodes)
		if err != nil {
			return route{}, err
		}

		return route{kind: routeNodes, targets: targets}, nil
	default:
		return route{kind: routeLocal}, nil
	}
}

func (nn *nodeNames) parseTargets(values []string) ([]target, error) {
	var targets []target

	seen := map[string]bool{}

	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}

			t, err := nn.parseTarget(name)
			if nm := (*notMemberError)(nil); errors.As(err, &nm) {
				// One node unknown does not keep the call from the others.
				t = target{name: nm.node, addr: net.JoinHostPort(nm.node, strconv.Itoa(nn.port)), absent: nm}
			} else if err != nil {
				return nil, err
			}

			if seen[t.key()] {
				continue
			}

			if len(targets) == MaxFanOut {
				return nil, fmt.Errorf("%w: more than %d nodes", ErrBadRouting, MaxFanOut)
			}

			seen[t.key()] = true
			targets = append(targets, t)
		}
	}

	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: %q names no node", ErrBadRouting, wire.MetadataNodes)
	}

	return targets, nil
}

// parseTarget reads one node: this node, a control-plane endpoint, or a
// live member. A member named by its hostname is reached at its address,
// and its certificate must name both.
func (nn *nodeNames) parseTarget(value string) (target, error) {
	name, err := CanonicalNode(value)
	if err != nil {
		return target{}, err
	}

	t := target{name: name, addr: net.JoinHostPort(name, strconv.Itoa(nn.port)), host: name}

	switch {
	case nn.self[name]:
		t.local, t.role = true, nn.selfRole

		return t, nil
	case nn.others[name]:
		t.role = RoleControlPlane

		return t, nil
	case nn.members == nil:
	case isAddr(name):
		if m, ok := nn.members.MemberByAddress(name); ok {
			t.role = m.Role

			return t, nil
		}
	default:
		if m, ok := nn.members.MemberByName(name); ok {
			if nn.self[m.Address] {
				return target{name: name, local: true, role: nn.selfRole}, nil
			}

			return target{
				name: name, addr: net.JoinHostPort(m.Address, strconv.Itoa(nn.port)), host: m.Address,
				memberName: name, role: m.Role,
			}, nil
		}
	}

	return target{}, &notMemberError{node: name}
}

func isAddr(name string) bool {
	_, err := netip.ParseAddr(name)

	return err == nil
}

// CanonicalNode returns the canonical form of a node named in routing
// metadata (target.Canonical), its refusals wrapped in ErrBadRouting.
func CanonicalNode(value string) (string, error) {
	name, err := routing.Canonical(value)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadRouting, err)
	}

	return name, nil
}

// newNodeNames builds the names apid accepts from Config.Self and
// Config.Names. A name there may carry a port (a listen address): it is
// dropped, the port of a target is always the API port.
func newNodeNames(port int, self, others []string) (*nodeNames, error) {
	nn := &nodeNames{port: port, self: map[string]bool{}, others: map[string]bool{}}

	for _, list := range []struct {
		names []string
		into  map[string]bool
		what  string
	}{{self, nn.self, "Self"}, {others, nn.others, "Names"}} {
		for _, v := range list.names {
			if h, ok := routing.SplitPort(v); ok {
				v = h
			}

			name, err := CanonicalNode(v)
			if err != nil {
				return nil, fmt.Errorf("apid: %s: %w", list.what, err)
			}

			list.into[name] = true
		}
	}

	return nn, nil
}
