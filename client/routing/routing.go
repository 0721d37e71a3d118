// Package routing reads a node named as a routing target (the `node` and
// `nodes` metadata of the Talos API, aegisctl's --nodes) into its
// canonical form. apid routes by that form and clients check their
// targets with the same function before sending anything, so the package
// lives on the client side and imports no server package.
package routing

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/aegis-os/aegis/ca"
)

// MaxLength bounds one node name: the longest DNS name. Targets carry no
// port, and an address, bracketed or not, is shorter.
const MaxLength = 253

// Error is a refusal of a target; its message names the value and what
// is wrong with it.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &Error{msg: fmt.Sprintf(format, args...)} }

// Canonical returns the canonical form of a node named as a target: an IP
// address as netip prints it, IPv4-mapped IPv6 unmapped (::ffff:10.0.0.1
// is 10.0.0.1), IPv6 brackets dropped; a DNS name in lower case without a
// final dot. A port is refused, every node is reached on the API port, as
// is anything that is not an address or a DNS name (a scheme, a path, a
// user, a zone, a wildcard). Errors are *Error.
func Canonical(value string) (string, error) {
	if value == "" || len(value) > MaxLength {
		return "", refuse("node name of %d bytes", len(value))
	}

	if _, ok := SplitPort(value); ok {
		return "", refuse("node %q: ports are not allowed, nodes are reached on the API port", value)
	}

	host := value
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}

	if addr, err := netip.ParseAddr(host); err == nil {
		return canonicalAddr(value, addr)
	}

	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if host != value || ca.CheckDNSName(name) != nil {
		return "", refuse("node %q is not an IP address or a DNS name", value)
	}

	return name, nil
}

// SplitPort returns the host of value if value is host:port with a port
// of digits (or none, "host:").
func SplitPort(value string) (string, bool) {
	host, port, err := net.SplitHostPort(value)
	if err != nil || strings.Trim(port, "0123456789") != "" {
		return "", false
	}

	return host, true
}

// canonicalAddr refuses what cannot be a node's address: a zone (it
// names an interface of this host), the unspecified address (it dials
// this host), multicast and broadcast.
func canonicalAddr(value string, addr netip.Addr) (string, error) {
	addr = addr.Unmap()

	switch {
	case addr.Zone() != "":
		return "", refuse("node %q: zones are not allowed", value)
	case addr.IsUnspecified(), addr.IsMulticast(), addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "", refuse("node %q is not a node address", value)
	}

	return addr.String(), nil
}
