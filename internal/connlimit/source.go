package connlimit

import (
	"net"

	"github.com/aegis-os/aegis/internal/source"
)

// sourceOf names the source of a connection from its remote address, as
// every per-source bound counts it (internal/source). An address that is
// not TCP (a Unix socket, a pipe in tests) is its own source.
func sourceOf(addr net.Addr) string {
	if a := source.Addr(addr); a.IsValid() {
		return source.Key(a)
	}

	return addr.Network() + ":" + addr.String()
}
