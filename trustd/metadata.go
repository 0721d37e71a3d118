package trustd

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// tokenFromMetadata reads the caller's token. Exactly one value is
// accepted: with several, which one counts would be a guess. Errors never
// repeat the value, which may be a secret.
func tokenFromMetadata(unsafe metadata.MD) (token.Token, error) {
	vals := unsafe.Get(wire.MetadataToken)

	switch len(vals) {
	case 0:
		return token.Token{}, fmt.Errorf("%w: no %q metadata", ErrInvalidToken, wire.MetadataToken)
	case 1:
	default:
		return token.Token{}, fmt.Errorf("%w: %d %q metadata values", ErrInvalidToken, len(vals), wire.MetadataToken)
	}

	tok, err := token.Parse(vals[0])
	if err != nil {
		return token.Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}

	return tok, nil
}

// sourceOf returns the caller's IP address, or the zero Addr for a caller
// without one (a Unix socket), which all such callers share.
func sourceOf(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}
	}

	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		addr, _ := netip.AddrFromSlice(tcp.IP)

		return addr.Unmap()
	}

	if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		return ap.Addr().Unmap()
	}

	return netip.Addr{}
}

// sourceString names a source in audit records.
func sourceString(addr netip.Addr) string {
	if !addr.IsValid() {
		return "local"
	}

	return addr.String()
}
