package trustd

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/aegis-os/aegis/internal/source"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// tokenFromMetadata reads the caller's token. Exactly one value is
// accepted: with several, which one counts would be a guess. Errors never
// repeat the value, which may be a secret.
func tokenFromMetadata(unsafe metadata.MD) (token.Token, error) {
	return tokenFromValues(unsafe.Get(wire.MetadataToken))
}

// tokenFromContext is tokenFromMetadata of a call's incoming metadata,
// reading the token's key alone rather than copying every key.
func tokenFromContext(ctx context.Context) (token.Token, error) {
	return tokenFromValues(metadata.ValueFromIncomingContext(ctx, wire.MetadataToken))
}

func tokenFromValues(vals []string) (token.Token, error) {
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

// caller is a connection's source as the checks and the audit records
// use it, worked out once per connection (auditStats.TagConn) rather than
// on every call.
type caller struct {
	addr netip.Addr
	// name is the source in audit records, key as refusals are counted
	// (source.Key).
	name, key string
}

func newCaller(addr netip.Addr) *caller {
	return &caller{addr: addr, name: sourceString(addr), key: source.Key(addr)}
}

// callerKey holds a connection's *caller in its calls' contexts.
type callerKey struct{}

// callerOf returns the caller of ctx's call: the one its connection was
// tagged with, or else worked out from the peer.
func callerOf(ctx context.Context) *caller {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c
	}

	return newCaller(sourceOf(ctx))
}

// sourceOf returns the caller's IP address, or the zero Addr for a caller
// without one (a Unix socket), which all such callers share.
func sourceOf(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}
	}

	return addrOf(p.Addr)
}

// addrOf is the IP address of a connection's remote end; the zero Addr
// if it has none.
func addrOf(a net.Addr) netip.Addr {
	if a == nil {
		return netip.Addr{}
	}

	if tcp, ok := a.(*net.TCPAddr); ok {
		addr, _ := netip.AddrFromSlice(tcp.IP)

		return addr.Unmap()
	}

	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
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
