package apid

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		name  string
		md    metadata.MD
		kind  routeKind
		addrs []string
		bad   bool
	}{
		{name: "none", md: metadata.MD{}, kind: routeLocal},
		{name: "nil", md: nil, kind: routeLocal},
		{name: "node", md: metadata.Pairs("node", "10.0.0.1"), kind: routeNode, addrs: []string{"10.0.0.1:50000"}},
		{name: "node with port", md: metadata.Pairs("node", "10.0.0.1:6000"), kind: routeNode, addrs: []string{"10.0.0.1:6000"}},
		{name: "node by name", md: metadata.Pairs("node", "cp-1.example"), kind: routeNode, addrs: []string{"cp-1.example:50000"}},
		{name: "node ipv6", md: metadata.Pairs("node", "fd00::1"), kind: routeNode, addrs: []string{"[fd00::1]:50000"}},
		{name: "node ipv6 bracketed", md: metadata.Pairs("node", "[fd00::1]"), kind: routeNode, addrs: []string{"[fd00::1]:50000"}},
		{name: "node ipv6 port", md: metadata.Pairs("node", "[fd00::1]:7"), kind: routeNode, addrs: []string{"[fd00::1]:7"}},
		{name: "node trimmed", md: metadata.Pairs("node", " 10.0.0.1 "), kind: routeNode, addrs: []string{"10.0.0.1:50000"}},
		{
			name: "nodes values", md: metadata.Pairs("nodes", "10.0.0.1", "nodes", "10.0.0.2"),
			kind: routeNodes, addrs: []string{"10.0.0.1:50000", "10.0.0.2:50000"},
		},
		{
			name: "nodes comma separated and duplicated", md: metadata.Pairs("nodes", "10.0.0.1, 10.0.0.2,,10.0.0.1", "nodes", "10.0.0.2:50000"),
			kind: routeNodes, addrs: []string{"10.0.0.1:50000", "10.0.0.2:50000"},
		},
		{name: "nodes single", md: metadata.Pairs("nodes", "10.0.0.1"), kind: routeNodes, addrs: []string{"10.0.0.1:50000"}},
		{name: "both keys", md: metadata.Pairs("node", "a", "nodes", "b"), bad: true},
		{name: "node twice", md: metadata.Pairs("node", "a", "node", "b"), bad: true},
		{name: "node empty", md: metadata.Pairs("node", ""), bad: true},
		{name: "nodes empty", md: metadata.Pairs("nodes", " , "), bad: true},
		{name: "scheme", md: metadata.Pairs("node", "unix:///run/machined.sock"), bad: true},
		{name: "path", md: metadata.Pairs("node", "10.0.0.1/x"), bad: true},
		{name: "host longer than a DNS name", md: metadata.Pairs("node", strings.Repeat("a", MaxHostLength+1)), bad: true},
		{name: "longest host", md: metadata.Pairs("node", strings.Repeat("a", MaxHostLength)), kind: routeNode, addrs: []string{strings.Repeat("a", MaxHostLength) + ":50000"}},
		{name: "user", md: metadata.Pairs("node", "root@10.0.0.1"), bad: true},
		{name: "zone", md: metadata.Pairs("node", "fe80::1%eth0"), bad: true},
		{name: "port zero", md: metadata.Pairs("node", "10.0.0.1:0"), bad: true},
		{name: "port too big", md: metadata.Pairs("node", "10.0.0.1:65536"), bad: true},
		{name: "port signed", md: metadata.Pairs("node", "10.0.0.1:+80"), bad: true},
		{name: "empty host", md: metadata.Pairs("node", ":50000"), bad: true},
		{name: "too long", md: metadata.Pairs("node", strings.Repeat("a", MaxTargetLength+1)), bad: true},
		{name: "too many", md: metadata.Pairs("nodes", manyNodes(MaxFanOut+1)), bad: true},
		{name: "as many as allowed", md: metadata.Pairs("nodes", manyNodes(MaxFanOut)), kind: routeNodes},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := parseRoute(tt.md, 50000)
			if tt.bad {
				if !errors.Is(err, ErrBadRouting) {
					t.Fatalf("err = %v, want ErrBadRouting", err)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if rt.kind != tt.kind {
				t.Fatalf("kind %v, want %v", rt.kind, tt.kind)
			}

			if tt.addrs == nil {
				return
			}

			var addrs []string
			for _, tg := range rt.targets {
				addrs = append(addrs, tg.addr)
			}

			if strings.Join(addrs, " ") != strings.Join(tt.addrs, " ") {
				t.Fatalf("targets %v, want %v", addrs, tt.addrs)
			}
		})
	}
}

func manyNodes(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = "node-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "-" + itoa(i)
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
	f.Add("unix:///x", "node-1.example")
	f.Add("", strings.Repeat("a,", 200))

	f.Fuzz(func(t *testing.T, node, nodes string) {
		md := metadata.MD{}
		if node != "" {
			md.Append(MetadataNode, node)
		}

		if nodes != "" {
			md.Append(MetadataNodes, nodes)
		}

		rt, err := parseRoute(md, 50000)
		if err != nil {
			if !errors.Is(err, ErrBadRouting) {
				t.Fatalf("error %v is not ErrBadRouting", err)
			}

			return
		}

		if len(rt.targets) > MaxFanOut {
			t.Fatalf("%d targets, limit %d", len(rt.targets), MaxFanOut)
		}

		for _, tg := range rt.targets {
			if strings.ContainsAny(tg.addr, "/@%? \t\n") || tg.host == "" || len(tg.name) > MaxTargetLength {
				t.Fatalf("unsafe target %+v", tg)
			}

			// What apid dials must parse back to the host it verifies.
			if again, err := parseTarget(tg.addr, 1); err != nil || again.host != tg.host {
				t.Fatalf("target %+v does not round-trip: %+v, %v", tg, again, err)
			}
		}
	})
}
