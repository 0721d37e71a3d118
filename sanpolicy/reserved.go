package sanpolicy

import (
	"net"
	"net/netip"
	"strings"
)

// Reserved is the set of addresses and names no token may obtain a
// certificate for: the control planes'. A certificate naming one would let
// its holder stand in for a control plane (a fake apid or trustd), so the
// set wins over any allowed-SAN pattern. The zero Reserved holds nothing;
// it is immutable once built and safe for concurrent use.
type Reserved struct {
	ips   map[netip.Addr]struct{}
	names map[string]struct{}
}

// NewReserved builds the set from hosts: IP addresses or DNS names, each
// optionally with a port (as endpoints are written), compared
// case-insensitively and without a trailing dot. Empty entries are skipped.
func NewReserved(hosts ...string) *Reserved {
	r := &Reserved{ips: map[netip.Addr]struct{}{}, names: map[string]struct{}{}}

	for _, h := range hosts {
		r.add(h)
	}

	return r
}

func (r *Reserved) add(h string) {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}

	h = strings.TrimSuffix(strings.Trim(strings.TrimSpace(h), "[]"), ".")
	if h == "" {
		return
	}

	if addr, err := netip.ParseAddr(h); err == nil {
		r.ips[addr.Unmap().WithZone("")] = struct{}{}

		return
	}

	r.names[strings.ToLower(h)] = struct{}{}
}

// Find returns the first of the given names that is reserved: a DNS name,
// an IP address, or a common name of either form.
func (r *Reserved) Find(commonName string, dnsNames []string, ips []net.IP) (string, bool) {
	if r == nil {
		return "", false
	}

	for _, ip := range ips {
		if addr, ok := netip.AddrFromSlice(ip); ok && r.hasIP(addr) {
			return ip.String(), true
		}
	}

	for _, name := range append([]string{commonName}, dnsNames...) {
		if name == "" {
			continue
		}

		if addr, err := netip.ParseAddr(name); err == nil {
			if r.hasIP(addr) {
				return name, true
			}

			continue
		}

		if _, ok := r.names[strings.ToLower(strings.TrimSuffix(name, "."))]; ok {
			return name, true
		}
	}

	return "", false
}

func (r *Reserved) hasIP(addr netip.Addr) bool {
	_, ok := r.ips[addr.Unmap()]

	return ok
}

// Len is the number of reserved addresses and names.
func (r *Reserved) Len() int {
	if r == nil {
		return 0
	}

	return len(r.ips) + len(r.names)
}
