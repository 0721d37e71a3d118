package source_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/aegis-os/aegis/internal/source"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string
	}{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::9", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"", source.Local},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			var a netip.Addr
			if tc.addr != "" {
				a = netip.MustParseAddr(tc.addr)
			}

			if got := source.Key(a); got != tc.want {
				t.Fatalf("Key(%s) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}

func TestBlockSameSource(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"fd00::1", "fd00::ffff:2", true},
		{"fd00:0:0:1::1", "fd00::1", false},
		{"10.0.0.1", "10.0.0.2", false},
		{"::ffff:10.0.0.1", "10.0.0.1", true},
	} {
		if got := source.Block(netip.MustParseAddr(tc.a)) == source.Block(netip.MustParseAddr(tc.b)); got != tc.same {
			t.Errorf("%s and %s: same source %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

func TestAddr(t *testing.T) {
	tcp := net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[::ffff:192.0.2.1]:50000"))
	if got := source.Key(source.Addr(tcp)); got != "192.0.2.1" {
		t.Fatalf("TCP address: %q", got)
	}

	if got := source.Addr(&net.UnixAddr{Name: "@", Net: "unix"}); got.IsValid() {
		t.Fatalf("Unix address has an IP: %s", got)
	}

	if got := source.Addr(nil); got.IsValid() {
		t.Fatalf("nil address has an IP: %s", got)
	}
}
