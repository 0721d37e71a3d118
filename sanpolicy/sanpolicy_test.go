package sanpolicy_test

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/sanpolicy"
)

func TestParseRefusals(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
	}{
		{name: "bare wildcard", pattern: "*"},
		{name: "wildcard in later label", pattern: "node.*.example"},
		{name: "two wildcards", pattern: "*-*.example"},
		{name: "empty", pattern: ""},
		{name: "empty label", pattern: "node..example"},
		{name: "trailing dot", pattern: "node.example."},
		{name: "underscore", pattern: "bad_name.example"},
		{name: "leading hyphen", pattern: "-*.example"},
		{name: "bad address", pattern: "10.5.0.300"},
		{name: "host bits set", pattern: "10.5.0.1/24"},
		{name: "prefix too long", pattern: "10.5.0.0/33"},
		{name: "zone", pattern: "fe80::1%eth0"},
		{name: "IPv4-mapped", pattern: "::ffff:10.5.0.2"},
		{name: "too long", pattern: strings.Repeat("a", sanpolicy.MaxPatternLength+1)},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := sanpolicy.Parse([]string{tt.pattern}); !errors.Is(err, sanpolicy.ErrBadPattern) {
				t.Fatalf("Parse(%q) err = %v, want ErrBadPattern", tt.pattern, err)
			}
		})
	}

	t.Run("too many", func(t *testing.T) {
		many := slices.Repeat([]string{"node.example"}, sanpolicy.MaxPatterns+1)
		if _, err := sanpolicy.Parse(many); !errors.Is(err, sanpolicy.ErrBadPattern) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestPermitsDNS(t *testing.T) {
	tests := []struct {
		pattern string
		name    string
		want    bool
	}{
		{"node-1.example", "node-1.example", true},
		{"node-1.example", "NODE-1.Example", true},
		{"Node-1.Example", "node-1.example", true},
		{"node-1.example", "node-2.example", false},
		{"node-1.example", "node-1.example.evil", false},
		{"node-1.example", "x.node-1.example", false},
		{"*.nodes.example", "a.nodes.example", true},
		{"*.nodes.example", "nodes.example", false},
		{"*.nodes.example", "a.b.nodes.example", false},
		{"node-*.example", "node-7.example", true},
		{"node-*.example", "node-.example", false},
		{"node-*.example", "worker-7.example", false},
		{"node-*.example", "node-7.sub.example", false},
		{"*-cp.example", "a-cp.example", true},
		{"*-cp.example", "-cp.example", false},
		{"n*e.example", "node.example", true},
		{"n*e.example", "ne.example", false},
		{"worker-*", "worker-3", true},
		{"worker-*", "worker-3.example", false},
		{"worker", "worker", true},
	}

	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.name, func(t *testing.T) {
			p, err := sanpolicy.Parse([]string{tt.pattern})
			if err != nil {
				t.Fatal(err)
			}

			if got := p.PermitsDNS(tt.name); got != tt.want {
				t.Fatalf("PermitsDNS(%q) = %v, want %v", tt.name, got, tt.want)
			}

			// An address policy never lets a DNS name through.
			if p.PermitsIP(netip.MustParseAddr("10.5.0.2")) {
				t.Fatal("DNS-only policy allowed an IP address")
			}
		})
	}
}

func TestPermitsIP(t *testing.T) {
	tests := []struct {
		pattern string
		addr    string
		want    bool
	}{
		{"10.5.0.0/24", "10.5.0.2", true},
		{"10.5.0.0/24", "10.5.1.2", false},
		{"10.5.0.0/24", "::ffff:10.5.0.2", true},
		{"10.5.0.2", "10.5.0.2", true},
		{"10.5.0.2", "10.5.0.3", false},
		{"fd00::/64", "fd00::2", true},
		{"fd00::/64", "fd01::2", false},
		{"fd00::2", "fd00::2", true},
		{"0.0.0.0/0", "192.0.2.1", true},
		{"0.0.0.0/0", "2001:db8::1", false},
	}

	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.addr, func(t *testing.T) {
			p, err := sanpolicy.Parse([]string{tt.pattern})
			if err != nil {
				t.Fatal(err)
			}

			if got := p.PermitsIP(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("PermitsIP(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	p, err := sanpolicy.Parse([]string{"node-*.example", "10.5.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		dns  []string
		ips  []net.IP
		ok   bool
	}{
		{name: "nothing", ok: true},
		{name: "all allowed", dns: []string{"node-1.example", "node-a.example"}, ips: []net.IP{net.ParseIP("10.5.0.9")}, ok: true},
		{name: "one name outside", dns: []string{"node-1.example", "evil.example"}},
		{name: "one address outside", dns: []string{"node-1.example"}, ips: []net.IP{net.ParseIP("10.6.0.9")}},
		{name: "malformed address", ips: []net.IP{{1, 2, 3}}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Check(tt.dns, tt.ips)
			if tt.ok != (err == nil) {
				t.Fatalf("Check = %v, want ok=%v", err, tt.ok)
			}

			if err != nil && !errors.Is(err, sanpolicy.ErrNotPermitted) {
				t.Fatalf("err = %v, want ErrNotPermitted", err)
			}
		})
	}
}

func TestUnrestricted(t *testing.T) {
	for name, p := range map[string]*sanpolicy.Policy{"nil": nil, "empty": mustParse(t)} {
		t.Run(name, func(t *testing.T) {
			if !p.Unrestricted() || !p.PermitsDNS("anything.example") || !p.PermitsIP(netip.MustParseAddr("192.0.2.1")) {
				t.Fatal("empty policy restricts")
			}

			if err := p.Check([]string{"a"}, []net.IP{net.ParseIP("192.0.2.1")}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStringsCanonical(t *testing.T) {
	p := mustParse(t, "Node-*.Example", "10.5.0.0/24", "10.5.0.2", "FD00::2", "fd00::/64")

	want := []string{"node-*.example", "10.5.0.0/24", "10.5.0.2", "fd00::2", "fd00::/64"}
	if got := p.Strings(); !slices.Equal(got, want) {
		t.Fatalf("Strings = %q, want %q", got, want)
	}
}

func mustParse(t *testing.T, patterns ...string) *sanpolicy.Policy {
	t.Helper()

	p, err := sanpolicy.Parse(patterns)
	if err != nil {
		t.Fatal(err)
	}

	return p
}

// FuzzParse feeds operator input (a pattern) and a name a CSR might carry.
func FuzzParse(f *testing.F) {
	for _, seed := range [][2]string{
		{"node-*.example", "node-1.example"},
		{"*.nodes.example", "a.nodes.example"},
		{"10.5.0.0/24", "10.5.0.2"},
		{"fd00::/64", "fd00::1"},
		{"worker-*", "worker-1"},
		{"*", "x"},
	} {
		f.Add(seed[0], seed[1])
	}

	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := sanpolicy.Parse([]string{pattern})
		if err != nil {
			if !errors.Is(err, sanpolicy.ErrBadPattern) {
				t.Fatalf("refusal does not wrap ErrBadPattern: %v", err)
			}

			return
		}

		canon := p.Strings()
		if again := mustParse(t, canon...).Strings(); !slices.Equal(again, canon) {
			t.Fatalf("canonical form not stable: %q -> %q", canon, again)
		}

		if p.Unrestricted() {
			t.Fatalf("one valid pattern %q gave an unrestricted policy", pattern)
		}

		if p.PermitsDNS(name) {
			// A wildcard stands for exactly one label or part of one.
			if strings.Count(name, ".") != strings.Count(canon[0], ".") || strings.Contains(name, "*") {
				t.Fatalf("%q matched %q across labels", canon[0], name)
			}
		}

		if !strings.Contains(pattern, "*") && !strings.ContainsAny(pattern, ":/") && !p.PermitsDNS(pattern) && !p.PermitsIP(addrOrZero(pattern)) {
			t.Fatalf("literal pattern %q does not match itself", pattern)
		}
	})
}

func addrOrZero(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)

	return a
}

// TestWithName: a caller's policy with the node's own name permits that
// name, in any case, and no other; a pattern is no name.
func TestWithName(t *testing.T) {
	base := sanpolicy.ForCaller(mustParse(t, "10.5.0.0/24"), netip.MustParseAddr("10.0.0.9"))
	if base.HasDNSPatterns() || !mustParse(t, "node-*.example").HasDNSPatterns() {
		t.Fatal("HasDNSPatterns is wrong")
	}

	p, err := base.WithName("Worker-1")
	if err != nil {
		t.Fatal(err)
	}

	if !p.PermitsDNS("worker-1") || p.PermitsDNS("worker-2") || !p.PermitsIP(netip.MustParseAddr("10.0.0.9")) || base.PermitsDNS("worker-1") {
		t.Fatal("WithName permits the wrong names, or changed the policy it copied")
	}

	if _, err := base.WithName("worker-*"); !errors.Is(err, sanpolicy.ErrBadPattern) {
		t.Fatalf("a pattern as name: %v, want ErrBadPattern", err)
	}
}
