package apid

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/internal/wire"
)

// testNames are the names of the route tests: this node is 10.0.0.9,
// cp-9 and cp-9.example; cp.example and 10.1.0.1 are control-plane
// endpoints; every address of 10.0.0.0/16, 127.0.0.4 and fd00::1 is a
// live member.
func testNames(t testing.TB) *nodeNames {
	t.Helper()

	nn, err := newNodeNames(50000, []string{"10.0.0.9:50000", "cp-9", "CP-9.example."}, []string{"cp.example", "10.1.0.1"})
	if err != nil {
		t.Fatal(err)
	}

	nn.members = testMembers{}

	return nn
}

// testMembers is a MemberResolver: named members by hostname, and any
// address of 10.0.0.0/16, 127.0.0.4 and fd00::1 as a worker's.
type testMembers map[string]Member

func (m testMembers) MemberByName(name string) (Member, bool) {
	mb, ok := m[name]

	return mb, ok
}

func (m testMembers) MemberByAddress(addr string) (Member, bool) {
	for _, mb := range m {
		if mb.Address == addr {
			return mb, true
		}
	}

	a := netip.MustParseAddr(addr)
	if netip.MustParsePrefix("10.0.0.0/16").Contains(a) || addr == "127.0.0.4" || addr == "fd00::1" {
		return Member{Hostname: "m-" + addr, Address: addr, Role: RoleWorker}, true
	}

	return Member{}, false
}

func TestParseRoute(t *testing.T) {
	tests := []struct {
		name  string
		md    metadata.MD
		kind  routeKind
		addrs []string
		bad   string
		// unknown is a node apid does not know: the call is refused
		// Unavailable for `node`, and for `nodes` that node alone gets
		// its refusal, nothing dialed.
		unknown string
	}{
		{name: "none", md: metadata.MD{}, kind: routeLocal},
		{name: "nil", md: nil, kind: routeLocal},
		{name: "node", md: metadata.Pairs("node", "10.0.0.1"), kind: routeNode, addrs: []string{"10.0.0.1:50000"}},
		{name: "node by a known name", md: metadata.Pairs("node", "cp.example"), kind: routeNode, addrs: []string{"cp.example:50000"}},
		{name: "known name, other case, final dot", md: metadata.Pairs("node", "CP.Example."), kind: routeNode, addrs: []string{"cp.example:50000"}},
		{name: "node itself by name", md: metadata.Pairs("node", "cp-9"), kind: routeNode, addrs: []string{"local"}},
		{name: "node ipv6", md: metadata.Pairs("node", "fd00::1"), kind: routeNode, addrs: []string{"[fd00::1]:50000"}},
		{name: "node ipv6 bracketed", md: metadata.Pairs("node", "[fd00::1]"), kind: routeNode, addrs: []string{"[fd00::1]:50000"}},
		{name: "node ipv6 long form", md: metadata.Pairs("node", "FD00:0:0::0001"), kind: routeNode, addrs: []string{"[fd00::1]:50000"}},
		{name: "node ipv4-mapped", md: metadata.Pairs("node", "::ffff:127.0.0.4"), kind: routeNode, addrs: []string{"127.0.0.4:50000"}},
		{name: "node ipv4-mapped long form", md: metadata.Pairs("node", "0::ffff:127.0.0.4"), kind: routeNode, addrs: []string{"127.0.0.4:50000"}},
		{name: "node ipv4-mapped bracketed", md: metadata.Pairs("node", "[::ffff:7f00:4]"), kind: routeNode, addrs: []string{"127.0.0.4:50000"}},
		{name: "node trimmed", md: metadata.Pairs("node", " 10.0.0.1 "), kind: routeNode, addrs: []string{"10.0.0.1:50000"}},
		{
			name: "nodes values", md: metadata.Pairs("nodes", "10.0.0.1", "nodes", "10.0.0.2"),
			kind: routeNodes, addrs: []string{"10.0.0.1:50000", "10.0.0.2:50000"},
		},
		{
			name: "nodes comma separated and duplicated", md: metadata.Pairs("nodes", "10.0.0.1, 10.0.0.2,,10.0.0.1", "nodes", "10.0.0.2"),
			kind: routeNodes, addrs: []string{"10.0.0.1:50000", "10.0.0.2:50000"},
		},
		{
			name: "aliases of one node", md: metadata.Pairs("nodes", "127.0.0.4,::ffff:127.0.0.4,0::ffff:127.0.0.4,[::ffff:127.0.0.4]"),
			kind: routeNodes, addrs: []string{"127.0.0.4:50000"},
		},
		{
			name: "this node by every name", md: metadata.Pairs("nodes", "10.0.0.9,cp-9,cp-9.example,::ffff:10.0.0.9,10.0.0.1"),
			kind: routeNodes, addrs: []string{"local", "10.0.0.1:50000"},
		},
		{
			name: "ipv6 spellings", md: metadata.Pairs("nodes", "fd00::1,FD00::1,fd00:0::1,[fd00::1]"),
			kind: routeNodes, addrs: []string{"[fd00::1]:50000"},
		},
		{name: "nodes single", md: metadata.Pairs("nodes", "10.0.0.1"), kind: routeNodes, addrs: []string{"10.0.0.1:50000"}},
		{name: "both keys", md: metadata.Pairs("node", "10.0.0.1", "nodes", "10.0.0.2"), bad: "both"},
		{name: "node twice", md: metadata.Pairs("node", "10.0.0.1", "node", "10.0.0.2"), bad: "one value"},
		{name: "node empty", md: metadata.Pairs("node", ""), bad: "0 bytes"},
		{name: "nodes empty", md: metadata.Pairs("nodes", " , "), bad: "names no node"},
		{name: "port", md: metadata.Pairs("node", "127.0.0.4:22"), bad: "ports are not allowed"},
		{name: "api port", md: metadata.Pairs("nodes", "10.0.0.1:50000"), bad: "ports are not allowed"},
		{name: "ipv6 port", md: metadata.Pairs("node", "[fd00::1]:7"), bad: "ports are not allowed"},
		{name: "name port", md: metadata.Pairs("node", "cp.example:50000"), bad: "ports are not allowed"},
		{name: "empty port", md: metadata.Pairs("node", "10.0.0.1:"), bad: "ports are not allowed"},
		{name: "unknown name", md: metadata.Pairs("node", "attacker.example"), unknown: "attacker.example"},
		{name: "unknown name in nodes", md: metadata.Pairs("nodes", "10.0.0.1,localhost"), kind: routeNodes, unknown: "localhost"},
		{name: "endpoint address", md: metadata.Pairs("node", "10.1.0.1"), kind: routeNode, addrs: []string{"10.1.0.1:50000"}},
		{name: "loopback, no member", md: metadata.Pairs("node", "127.0.0.1"), unknown: "127.0.0.1"},
		{name: "ipv6 loopback, no member", md: metadata.Pairs("node", "::1"), unknown: "::1"},
		{name: "metadata service", md: metadata.Pairs("node", "169.254.169.254"), unknown: "169.254.169.254"},
		{name: "no member in nodes", md: metadata.Pairs("nodes", "10.0.0.1,10.2.0.1"), kind: routeNodes, unknown: "10.2.0.1"},
		{name: "scheme", md: metadata.Pairs("node", "unix:///run/machined.sock"), bad: "not an IP address or a DNS name"},
		{name: "path", md: metadata.Pairs("node", "10.0.0.1/x"), bad: "not an IP address or a DNS name"},
		{name: "bracketed name", md: metadata.Pairs("node", "[cp.example]"), bad: "not an IP address or a DNS name"},
		{name: "underscore", md: metadata.Pairs("node", "cp_1"), bad: "not an IP address or a DNS name"},
		{name: "wildcard", md: metadata.Pairs("node", "*.example"), bad: "not an IP address or a DNS name"},
		{name: "longest name", md: metadata.Pairs("node", longName(MaxTargetLength)), unknown: longName(MaxTargetLength)},
		{name: "user", md: metadata.Pairs("node", "root@10.0.0.1"), bad: "not an IP address or a DNS name"},
		{name: "zone", md: metadata.Pairs("node", "fe80::1%eth0"), bad: "zones are not allowed"},
		{name: "unspecified", md: metadata.Pairs("node", "0.0.0.0"), bad: "not a node address"},
		{name: "unspecified ipv6", md: metadata.Pairs("node", "::"), bad: "not a node address"},
		{name: "unspecified mapped", md: metadata.Pairs("node", "::ffff:0.0.0.0"), bad: "not a node address"},
		{name: "multicast", md: metadata.Pairs("node", "224.0.0.1"), bad: "not a node address"},
		{name: "broadcast", md: metadata.Pairs("node", "255.255.255.255"), bad: "not a node address"},
		{name: "too long", md: metadata.Pairs("node", strings.Repeat("a", MaxTargetLength+1)), bad: "bytes"},
		{name: "too many", md: metadata.Pairs("nodes", manyNodes(MaxFanOut+1)), bad: "more than"},
		{name: "as many as allowed", md: metadata.Pairs("nodes", manyNodes(MaxFanOut)), kind: routeNodes},
		{name: "aliases do not count against the bound", md: metadata.Pairs("nodes", manyNodes(MaxFanOut)+","+manyAliases(MaxFanOut)), kind: routeNodes},
	}

	nn := testNames(t)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := nn.parseRoute(tt.md)
			if tt.unknown != "" && tt.kind != routeNodes {
				checkNotMember(t, err, tt.unknown)

				return
			}

			if tt.bad != "" {
				if !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err = %v, want ErrBadRouting saying %q", err, tt.bad)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if rt.kind != tt.kind {
				t.Fatalf("kind %v, want %v", rt.kind, tt.kind)
			}

			if tt.unknown != "" {
				checkAbsentTarget(t, rt.targets, tt.unknown)
			}

			if tt.addrs == nil {
				return
			}

			var addrs []string
			for _, tg := range rt.targets {
				if tg.local {
					addrs = append(addrs, "local")
				} else {
					addrs = append(addrs, tg.addr)
				}
			}

			if strings.Join(addrs, " ") != strings.Join(tt.addrs, " ") {
				t.Fatalf("targets %v, want %v", addrs, tt.addrs)
			}
		})
	}
}

func TestNewNodeNamesRefusesBadNames(t *testing.T) {
	for _, self := range [][]string{{"unix:///x"}, {"0.0.0.0"}, {"a_b"}} {
		if _, err := newNodeNames(50000, self, nil); err == nil {
			t.Errorf("Self %q accepted", self)
		}

		if _, err := newNodeNames(50000, nil, self); err == nil {
			t.Errorf("Names %q accepted", self)
		}
	}
}

// longName is a valid DNS name of n bytes.
func longName(n int) string {
	label := strings.Repeat("a", 63) + "."
	name := strings.Repeat(label, n/len(label))

	return name + strings.Repeat("b", n-len(name))
}

// manyAliases names the first n addresses of manyNodes as IPv4-mapped IPv6.
func manyAliases(n int) string {
	names := strings.Split(manyNodes(n), ",")
	for i, v := range names {
		names[i] = "::ffff:" + v
	}

	return strings.Join(names, ",")
}

func manyNodes(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = "10.0." + itoa(i/256) + "." + itoa(i%256)
	}

	return strings.Join(names, ",")
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}

	return itoa(i/10) + string(rune('0'+i%10))
}

func FuzzParseRoute(f *testing.F) {
	f.Add("10.0.0.1", "")
	f.Add("", "10.0.0.1,10.0.0.2:50001")
	f.Add("[fd00::1]:7", "a,b,,c")
	f.Add("unix:///x", "cp.example,CP-9")
	f.Add("", "127.0.0.4,::ffff:127.0.0.4,0::ffff:127.0.0.4,[::ffff:7f00:4]")
	f.Add("", strings.Repeat("a,", 200))

	nn := testNames(f)

	f.Fuzz(func(t *testing.T, node, nodes string) {
		md := metadata.MD{}
		if node != "" {
			md.Append(wire.MetadataNode, node)
		}

		if nodes != "" {
			md.Append(wire.MetadataNodes, nodes)
		}

		rt, err := nn.parseRoute(md)
		if err != nil {
			if !errors.Is(err, ErrBadRouting) && !errors.As(err, new(*notMemberError)) {
				t.Fatalf("error %v is not ErrBadRouting", err)
			}

			return
		}

		if len(rt.targets) > MaxFanOut {
			t.Fatalf("%d targets, limit %d", len(rt.targets), MaxFanOut)
		}

		seen := map[string]bool{}

		for _, tg := range rt.targets {
			checkFuzzedTarget(t, nn, tg)

			if seen[tg.key()] {
				t.Fatalf("node %q twice in %v", tg.name, rt.targets)
			}

			seen[tg.key()] = true
		}
	})
}

// checkFuzzedTarget checks one target of a route that parsed: apid dials
// only an address or a name it knows, on the API port, and the canonical
// name is a fixed point.
func checkFuzzedTarget(t *testing.T, nn *nodeNames, tg target) {
	t.Helper()

	if tg.absent != nil {
		if tg.host != "" || tg.local || tg.absent.node != tg.name {
			t.Fatalf("unknown node kept as a target that could be dialed: %+v", tg)
		}

		if _, _, err := (&Server{}).backend(tg, caller{}); err != tg.absent {
			t.Fatalf("backend for unknown node %q: %v, want its refusal", tg.name, err)
		}

		return
	}

	host, port, err := net.SplitHostPort(tg.addr)
	if err != nil || port != "50000" || host != tg.name || tg.host != tg.name || strings.ContainsAny(tg.addr, "/@%? \t\n") {
		t.Fatalf("unsafe target %+v", tg)
	}

	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Is4In6() || addr.String() != host {
			t.Fatalf("address %q not canonical", host)
		}
	} else if !tg.local && !nn.others[host] {
		t.Fatalf("unknown name %q accepted", host)
	}

	if !tg.local && !nn.others[host] {
		if _, ok := nn.members.MemberByAddress(host); !ok {
			t.Fatalf("address %q of no member accepted", host)
		}
	}

	if again, err := CanonicalNode(tg.name); err != nil || again != tg.name {
		t.Fatalf("canonical %q is not a fixed point: %q, %v", tg.name, again, err)
	}
}

// TestRouteByMemberName: a member's hostname routes to its address, is
// deduplicated with it, and its certificate is checked for the address
// and the name; a name no member has is refused, and names the node knows
// itself win.
func TestRouteByMemberName(t *testing.T) {
	nn := testNames(t)
	nn.members = testMembers{
		"worker-1":   {Hostname: "worker-1", Address: "10.0.0.5", Role: RoleWorker},
		"cp-9":       {Hostname: "cp-9", Address: "10.0.0.77", Role: RoleControlPlane},
		"self-alias": {Hostname: "self-alias", Address: "10.0.0.9", Role: RoleControlPlane},
	}

	rt, err := nn.parseRoute(metadata.Pairs("nodes", "Worker-1.,10.0.0.5,cp-9,self-alias"))
	if err != nil {
		t.Fatal(err)
	}

	if len(rt.targets) != 2 {
		t.Fatalf("targets %+v, want worker-1 once and this node once", rt.targets)
	}

	if w := rt.targets[0]; w.name != "worker-1" || w.addr != "10.0.0.5:50000" || w.host != "10.0.0.5" || w.memberName != "worker-1" ||
		w.role != RoleWorker || w.local {
		t.Errorf("worker-1 target %+v", w)
	}

	if !rt.targets[1].local {
		t.Errorf("cp-9 is this node's own name, not the member's: %+v", rt.targets[1])
	}

	_, err = nn.parseRoute(metadata.Pairs("node", "worker-2"))
	checkNotMember(t, err, "worker-2")
}

// checkNotMember checks that err refuses node as no node apid knows.
func checkNotMember(t *testing.T, err error, node string) {
	t.Helper()

	if nm := (*notMemberError)(nil); !errors.As(err, &nm) || nm.node != node ||
		!strings.Contains(err.Error(), strconv.Quote(node)+" is neither this node") {
		t.Fatalf("err = %v, want %q refused as no node of the cluster", err, node)
	}
}

// checkAbsentTarget checks that targets hold node as unknown: refused
// alone, never dialed.
func checkAbsentTarget(t *testing.T, targets []target, node string) {
	t.Helper()

	for _, tg := range targets {
		if tg.name != node {
			continue
		}

		if tg.absent == nil || tg.host != "" || tg.local {
			t.Fatalf("unknown node %q is a target that could be dialed: %+v", node, tg)
		}

		return
	}

	t.Fatalf("unknown node %q missing from %+v", node, targets)
}
