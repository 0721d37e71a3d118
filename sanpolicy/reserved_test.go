package sanpolicy_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/aegis-os/aegis/sanpolicy"
)

func TestReserved(t *testing.T) {
	r := sanpolicy.NewReserved("10.0.0.1:50000", "[fd00::1]:50001", "CP-1.Example.", "", "cp-2", "::ffff:10.0.0.3")

	tests := []struct {
		name  string
		cn    string
		dns   []string
		ips   []string
		found string
	}{
		{name: "other names", cn: "worker-1", dns: []string{"worker-1.example"}, ips: []string{"10.0.0.9"}},
		{name: "address with the port dropped", ips: []string{"10.0.0.1"}, found: "10.0.0.1"},
		{name: "IPv6 address", ips: []string{"fd00::1"}, found: "fd00::1"},
		{name: "IPv4-mapped form of a reserved address", ips: []string{"::ffff:10.0.0.1"}, found: "10.0.0.1"},
		{name: "reserved in its mapped form", ips: []string{"10.0.0.3"}, found: "10.0.0.3"},
		{name: "name in another case, trailing dot", dns: []string{"cp-1.EXAMPLE."}, found: "cp-1.EXAMPLE."},
		{name: "single-label name", dns: []string{"a.example", "CP-2"}, found: "CP-2"},
		{name: "common name", cn: "cp-2", found: "cp-2"},
		{name: "address as common name", cn: "10.0.0.1", found: "10.0.0.1"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ips []net.IP
			for _, ip := range tt.ips {
				ips = append(ips, net.ParseIP(ip))
			}

			got, ok := r.Find(tt.cn, tt.dns, ips)
			if ok != (tt.found != "") || got != tt.found {
				t.Fatalf("Find = %q, %v; want %q", got, ok, tt.found)
			}
		})
	}

	if (*sanpolicy.Reserved)(nil).Len() != 0 || r.Len() != 5 {
		t.Fatalf("Len = %d", r.Len())
	}
}

func TestForCaller(t *testing.T) {
	names, err := sanpolicy.Parse([]string{"node-*.example"})
	if err != nil {
		t.Fatal(err)
	}

	src := netip.MustParseAddr("10.0.0.9")

	tests := []struct {
		name   string
		policy *sanpolicy.Policy
		source netip.Addr
		dns    []string
		ips    []string
		ok     bool
	}{
		{name: "the source", source: src, ips: []string{"10.0.0.9"}, ok: true},
		{name: "the source, IPv4-mapped", source: netip.MustParseAddr("::ffff:10.0.0.9"), ips: []string{"10.0.0.9"}, ok: true},
		{name: "another address", source: src, ips: []string{"10.0.0.8"}},
		{name: "a name without a policy", source: src, dns: []string{"node-1.example"}},
		{name: "an allowed name", policy: names, source: src, dns: []string{"node-1.example"}, ips: []string{"10.0.0.9"}, ok: true},
		{name: "no source, no policy: nothing", ips: []string{"10.0.0.9"}},
		{name: "unspecified source adds nothing", source: netip.IPv4Unspecified(), ips: []string{"0.0.0.0"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sanpolicy.ForCaller(tt.policy, tt.source)
			if p.Unrestricted() {
				t.Fatal("a caller's policy is unrestricted")
			}

			var ips []net.IP
			for _, ip := range tt.ips {
				ips = append(ips, net.ParseIP(ip))
			}

			if err := p.Check(tt.dns, ips); (err == nil) != tt.ok {
				t.Fatalf("Check = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
