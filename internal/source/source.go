// Package source names where a caller comes from, as every per-source bound
// of Aegis counts it: connection caps, the rate limit of failed requests,
// and the aggregated logs of refusals. One rule for all of them, so a host
// is one source to each.
package source

import (
	"net"
	"net/netip"
)

// IPv6Bits is the prefix of an IPv6 address that names one source. A /64 is
// the smallest block a site is given and what one host picks its addresses
// from freely (SLAAC, privacy addresses): counted address by address, a
// single host could appear as 2^64 sources and push every other one out of
// a bounded table.
const IPv6Bits = 64

// Local is the key of a caller without an IP address (a Unix socket, an
// in-process pipe).
const Local = "local"

// Block returns the block addr counts as: an IPv4 address alone (an
// IPv4-mapped IPv6 address as IPv4), an IPv6 address by its /IPv6Bits, its
// zone dropped. The zero Addr gives the zero Prefix.
func Block(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return netip.Prefix{}
	}

	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}

	p, _ := addr.Prefix(IPv6Bits)

	return p
}

// Key is Block as text: an IPv4 address as itself, an IPv6 block in CIDR
// notation, and Local for the zero Addr.
func Key(addr netip.Addr) string {
	b := Block(addr)

	switch {
	case !b.IsValid():
		return Local
	case b.Addr().Is4():
		return b.Addr().String()
	default:
		return b.String()
	}
}

// Addr returns the IP address of a connection's remote address, or the zero
// Addr when it has none (a Unix socket).
func Addr(addr net.Addr) netip.Addr {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}

	if addr == nil {
		return netip.Addr{}
	}

	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}
	}

	return ap.Addr()
}
