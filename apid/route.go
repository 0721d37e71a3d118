package apid

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
)

// The routing metadata keys of the Talos API. Clients of the 1.11–1.13
// series send `nodes` and let apid fan out; newer ones send `node` to each
// node and fan out themselves.
const (
	MetadataNode  = "node"
	MetadataNodes = "nodes"
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
	// name is the node as the client wrote it; fan-out replies carry it as
	// their hostname, so the client can match them to what it asked for.
	name string
	// addr is the host:port dialed.
	addr string
	// host is the name the node's server certificate must carry.
	host string
}

// parseRoute reads the routing metadata of an incoming call. Targets
// without a port get defaultPort. `node` must hold one name; `nodes` holds
// one or more, as several values or comma-separated in one, and a node
// named twice (even as "10.0.0.1" and "10.0.0.1:50000") is called once,
// under the first name: a mutating call must not run twice on one node.
func parseRoute(md metadata.MD, defaultPort int) (route, error) {
	node, hasNode := md[MetadataNode]
	nodes, hasNodes := md[MetadataNodes]

	switch {
	case hasNode && hasNodes:
		return route{}, fmt.Errorf("%w: both %q and %q given", ErrBadRouting, MetadataNode, MetadataNodes)
	case hasNode:
		if len(node) != 1 {
			return route{}, fmt.Errorf("%w: %q must have one value, has %d", ErrBadRouting, MetadataNode, len(node))
		}

		t, err := parseTarget(strings.TrimSpace(node[0]), defaultPort)
		if err != nil {
			return route{}, err
		}

		return route{kind: routeNode, targets: []target{t}}, nil
	case hasNodes:
		targets, err := parseTargets(nodes, defaultPort)
		if err != nil {
			return route{}, err
		}

		return route{kind: routeNodes, targets: targets}, nil
	default:
		return route{kind: routeLocal}, nil
	}
}

func parseTargets(values []string, defaultPort int) ([]target, error) {
	var targets []target

	seen := map[string]bool{}

	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}

			t, err := parseTarget(name, defaultPort)
			if err != nil {
				return nil, err
			}

			if seen[t.addr] {
				continue
			}

			if len(targets) == MaxFanOut {
				return nil, fmt.Errorf("%w: more than %d nodes", ErrBadRouting, MaxFanOut)
			}

			seen[t.addr] = true
			targets = append(targets, t)
		}
	}

	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: %q names no node", ErrBadRouting, MetadataNodes)
	}

	return targets, nil
}

// parseTarget reads one node: a host (DNS name, IPv4 or IPv6 address,
// bracketed or not) with an optional port.
func parseTarget(name string, defaultPort int) (target, error) {
	if name == "" || len(name) > MaxTargetLength {
		return target{}, fmt.Errorf("%w: node name of %d bytes", ErrBadRouting, len(name))
	}

	host, port := name, defaultPort

	if h, p, err := net.SplitHostPort(name); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 || p[0] == '+' {
			return target{}, fmt.Errorf("%w: node %q: bad port", ErrBadRouting, name)
		}

		host, port = h, n
	} else if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		host = name[1 : len(name)-1]
	}

	// A host longer than a DNS name may be would make a target whose
	// host:port no longer fits MaxTargetLength.
	if len(host) > MaxHostLength || !validHost(host) {
		return target{}, fmt.Errorf("%w: node %q: bad host", ErrBadRouting, name)
	}

	return target{name: name, addr: net.JoinHostPort(host, strconv.Itoa(port)), host: host}, nil
}

// validHost accepts IP addresses and names made of letters, digits, dots,
// hyphens and underscores: nothing that could change what is dialed (a
// scheme, a path, a user, a zone) gets through.
func validHost(host string) bool {
	if host == "" {
		return false
	}

	if ip := net.ParseIP(host); ip != nil {
		return true
	}

	for _, c := range []byte(host) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return false
		}
	}

	return true
}
