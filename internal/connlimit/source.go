package connlimit

import (
	"net"
	"net/netip"
)

// sourceOf names the source of a connection from its remote address: an
// IPv4 address (IPv4-mapped IPv6 included) or the IPv6 /IPv6SourceBits
// around it. An address that is not TCP (a Unix socket, a pipe in tests) is
// its own source.
func sourceOf(addr net.Addr) string {
	var ap netip.AddrPort

	switch a := addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		parsed, err := netip.ParseAddrPort(addr.String())
		if err != nil {
			return addr.Network() + ":" + addr.String()
		}

		ap = parsed
	}

	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return ip.String()
	}

	return netip.PrefixFrom(ip.WithZone(""), IPv6SourceBits).Masked().String()
}
