package apid

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
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
	// addr is the host:port dialed: name on the API port.
	addr string
	// host is the name the node's server certificate must carry.
	host string
	// local marks this node, served by the local machined.
	local bool
}

// key identifies the node a target reaches: every name of this node is one
// node, whatever spelling the caller used.
func (t target) key() string {
	if t.local {
		return ""
	}

	return t.addr
}

// MemberResolver resolves a cluster member's hostname (canonical: lower
// case, no final dot) to its canonical address.
type MemberResolver interface {
	MemberAddress(name string) (string, bool)
}

// nodeNames are the names apid accepts in `node`/`nodes` besides
// addresses: one of the node's own names, a name its configuration gives
// another node (the control-plane endpoints), or the hostname of a
// cluster member, which routes to the member's address. Any other name is
// refused without a lookup, so a caller cannot make apid resolve or dial
// hosts of its choosing.
type nodeNames struct {
	// members resolves member hostnames; nil knows none.
	members MemberResolver
	// port is the API port of every node.
	port int
	// self holds this node's canonical names and addresses.
	self map[string]bool
	// others holds the canonical DNS names of other nodes.
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
			if err != nil {
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

// parseTarget reads one node: an address, or a name the node knows.
func (nn *nodeNames) parseTarget(value string) (target, error) {
	name, err := CanonicalNode(value)
	if err != nil {
		return target{}, err
	}

	t := target{name: name, addr: net.JoinHostPort(name, strconv.Itoa(nn.port)), host: name, local: nn.self[name]}

	if _, err := netip.ParseAddr(name); err == nil || t.local || nn.others[name] {
		return t, nil
	}

	// A member's name is reached at its address, and its certificate
	// checked for that address: a worker's names only its addresses.
	if nn.members != nil {
		if addr, ok := nn.members.MemberAddress(name); ok {
			return target{name: name, addr: net.JoinHostPort(addr, strconv.Itoa(nn.port)), host: addr, local: nn.self[addr]}, nil
		}
	}

	return target{}, fmt.Errorf("%w: node %q is not a known node name (give its address)", ErrBadRouting, value)
}

// CanonicalNode returns the canonical form of a node named in routing
// metadata: an IP address as netip prints it, IPv4-mapped IPv6 unmapped
// (::ffff:10.0.0.1 is 10.0.0.1), IPv6 brackets dropped; a DNS name in
// lower case without a final dot. A port is refused, every node is
// reached on the API port, as is anything that is not an address or a
// DNS name (a scheme, a path, a user, a zone, a wildcard). Errors wrap
// ErrBadRouting.
func CanonicalNode(value string) (string, error) {
	if value == "" || len(value) > MaxTargetLength {
		return "", fmt.Errorf("%w: node name of %d bytes", ErrBadRouting, len(value))
	}

	if _, ok := splitPort(value); ok {
		return "", fmt.Errorf("%w: node %q: ports are not allowed, nodes are reached on the API port", ErrBadRouting, value)
	}

	host := value
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}

	if addr, err := netip.ParseAddr(host); err == nil {
		return canonicalAddr(value, addr)
	}

	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if host != value || ca.CheckDNSName(name) != nil {
		return "", fmt.Errorf("%w: node %q is not an IP address or a DNS name", ErrBadRouting, value)
	}

	return name, nil
}

// splitPort returns the host of value if value is host:port with a port
// of digits (or none, "host:").
func splitPort(value string) (string, bool) {
	host, port, err := net.SplitHostPort(value)
	if err != nil || strings.Trim(port, "0123456789") != "" {
		return "", false
	}

	return host, true
}

// canonicalAddr refuses what cannot be a node's address: a zone (it
// names an interface of this host), the unspecified address (it dials
// this host), multicast and broadcast.
func canonicalAddr(value string, addr netip.Addr) (string, error) {
	addr = addr.Unmap()

	switch {
	case addr.Zone() != "":
		return "", fmt.Errorf("%w: node %q: zones are not allowed", ErrBadRouting, value)
	case addr.IsUnspecified(), addr.IsMulticast(), addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "", fmt.Errorf("%w: node %q is not a node address", ErrBadRouting, value)
	}

	return addr.String(), nil
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
			if h, ok := splitPort(v); ok {
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
