// Package sanpolicy restricts the names a certificate obtained with a
// bootstrap token may carry. An operator writes the policy when creating the
// token: DNS name patterns and IP networks. trustd checks every SAN of a
// request against it after ca.ParseCSR's own rules have passed.
//
// Pattern forms:
//
//	node-1.example     exactly this name (case-insensitive)
//	*.nodes.example    one label, any, in front of nodes.example
//	node-*.example     a first label starting "node-" (the * matches one or more characters)
//	worker-*           a single-label name starting "worker-"
//	10.5.0.0/24        any address in the network
//	fd00::2            exactly this address
//
// A wildcard may appear only in the first label, at most once, and a bare "*"
// as the whole first label needs at least one more label after it, so no
// pattern matches every name.
package sanpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Errors of the package; refusals wrap one of them.
var (
	// ErrBadPattern is wrapped by Parse's refusals.
	ErrBadPattern = errors.New("sanpolicy: invalid allowed-SAN pattern")
	// ErrNotPermitted is wrapped by Check's refusals.
	ErrNotPermitted = errors.New("sanpolicy: SAN is neither the caller's address nor allowed by the token")
)

// Policy is a parsed list of allowed SANs. The nil or empty Policy that
// Parse returns is unrestricted; a policy made by ForCaller never is. A
// Policy is immutable and safe for concurrent use.
type Policy struct {
	dns  []dnsPattern
	nets []netip.Prefix
	// closed makes an empty policy allow nothing rather than everything.
	closed bool
}

// ForCaller is the policy a token caller's request is held to: the
// address the call came from (what the caller can show is its own) plus
// what the token explicitly allows (p, which may be nil). An invalid source
// (a caller without an IP address) adds nothing. The result is never
// unrestricted: with no source and no pattern it allows no name at all.
func ForCaller(p *Policy, source netip.Addr) *Policy {
	out := &Policy{closed: true}
	if p != nil {
		out.dns = append(out.dns, p.dns...)
		out.nets = append(out.nets, p.nets...)
	}

	if source = source.Unmap().WithZone(""); source.IsValid() && !source.IsUnspecified() {
		out.nets = append(out.nets, netip.PrefixFrom(source, source.BitLen()))
	}

	return out
}

// Parse reads an operator's pattern list. Every pattern must be valid; the
// error names the first that is not. An empty list gives an unrestricted
// policy.
func Parse(unsafe []string) (*Policy, error) {
	if len(unsafe) > MaxPatterns {
		return nil, fmt.Errorf("%w: %d patterns, limit %d", ErrBadPattern, len(unsafe), MaxPatterns)
	}

	p := &Policy{}

	for _, s := range unsafe {
		if len(s) > MaxPatternLength {
			return nil, fmt.Errorf("%w: pattern of %d bytes, limit %d", ErrBadPattern, len(s), MaxPatternLength)
		}

		if looksLikeIP(s) {
			prefix, err := parsePrefix(s)
			if err != nil {
				return nil, err
			}

			p.nets = append(p.nets, prefix)

			continue
		}

		d, err := parseDNSPattern(s)
		if err != nil {
			return nil, err
		}

		p.dns = append(p.dns, d)
	}

	return p, nil
}

// Unrestricted reports whether the policy allows every name.
func (p *Policy) Unrestricted() bool { return p == nil || (!p.closed && len(p.dns)+len(p.nets) == 0) }

// HasDNSPatterns reports whether the policy names DNS patterns. A token
// without any may still obtain one name, the node's own (WithName).
func (p *Policy) HasDNSPatterns() bool { return p != nil && len(p.dns) > 0 }

// WithName returns a copy of the policy that also permits exactly name,
// which must be a valid DNS name: the node's own name, for a token that
// names no DNS pattern. Whether the name is free is for the caller to
// decide. An unrestricted policy is returned as it is.
func (p *Policy) WithName(name string) (*Policy, error) {
	if p.Unrestricted() {
		return p, nil
	}

	d, err := parseDNSPattern(name)
	if err != nil {
		return nil, err
	}

	if d.wild {
		return nil, fmt.Errorf("%w: %q is a pattern, not a name", ErrBadPattern, name)
	}

	out := &Policy{closed: p.closed, nets: p.nets}
	out.dns = append(append(out.dns, p.dns...), d)

	return out, nil
}

// Strings returns the patterns in canonical form: DNS patterns lower-cased,
// networks as CIDRs, single addresses without a prefix length.
func (p *Policy) Strings() []string {
	if p == nil {
		return nil
	}

	out := make([]string, 0, len(p.dns)+len(p.nets))
	for _, d := range p.dns {
		out = append(out, d.String())
	}

	for _, n := range p.nets {
		if n.IsSingleIP() {
			out = append(out, n.Addr().String())
		} else {
			out = append(out, n.String())
		}
	}

	return out
}

// PermitsDNS reports whether name matches a DNS pattern of the policy.
func (p *Policy) PermitsDNS(name string) bool {
	if p.Unrestricted() {
		return true
	}

	name = strings.ToLower(name)
	for _, d := range p.dns {
		if d.match(name) {
			return true
		}
	}

	return false
}

// PermitsIP reports whether addr lies in a network of the policy. An
// IPv4-mapped IPv6 address is treated as the IPv4 address it maps.
func (p *Policy) PermitsIP(addr netip.Addr) bool {
	if p.Unrestricted() {
		return true
	}

	addr = addr.Unmap()
	for _, n := range p.nets {
		if n.Contains(addr) {
			return true
		}
	}

	return false
}

// Check returns an error wrapping ErrNotPermitted that names the first of the
// given SANs the policy does not allow, or nil if it allows them all.
func (p *Policy) Check(dnsNames []string, ips []net.IP) error {
	if p.Unrestricted() {
		return nil
	}

	for _, name := range dnsNames {
		if !p.PermitsDNS(name) {
			return fmt.Errorf("%w: DNS name %q", ErrNotPermitted, name)
		}
	}

	for _, ip := range ips {
		addr, ok := netip.AddrFromSlice(ip)
		if !ok || !p.PermitsIP(addr) {
			return fmt.Errorf("%w: IP address %s", ErrNotPermitted, ip)
		}
	}

	return nil
}

// looksLikeIP tells address patterns from DNS ones: a DNS label cannot hold
// ':' or '/', and a name of digits and dots only is taken for an address,
// as x509 verifiers would take it.
func looksLikeIP(s string) bool {
	if strings.ContainsAny(s, ":/%") {
		return true
	}

	return strings.Trim(s, "0123456789.") == "" && s != ""
}

func parsePrefix(s string) (netip.Prefix, error) {
	var (
		prefix netip.Prefix
		err    error
	)

	if strings.Contains(s, "/") {
		prefix, err = netip.ParsePrefix(s)
	} else {
		var addr netip.Addr
		if addr, err = netip.ParseAddr(s); err == nil {
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
	}

	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("%w: %q is not an IP address or CIDR", ErrBadPattern, s)
	case strings.Contains(s, "%"):
		return netip.Prefix{}, fmt.Errorf("%w: %q has a zone", ErrBadPattern, s)
	case prefix.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("%w: %q is IPv4-mapped; write the IPv4 form", ErrBadPattern, s)
	case prefix != prefix.Masked():
		// A typo like 10.5.0.1/24 more likely meant one host than the
		// whole network; refuse rather than guess.
		return netip.Prefix{}, fmt.Errorf("%w: %q has host bits set (network is %s)", ErrBadPattern, s, prefix.Masked())
	}

	return prefix, nil
}
