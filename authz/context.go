package authz

import (
	"context"
	"crypto/x509"

	"github.com/aegis-os/aegis/authz/role"
)

type (
	rolesKey        struct{}
	peerKey         struct{}
	impersonatedKey struct{}
)

// ContextWithRoles returns ctx carrying the caller's roles, as the role
// injector sets them for the authorizer and the handlers.
func ContextWithRoles(ctx context.Context, roles role.Set) context.Context {
	return context.WithValue(ctx, rolesKey{}, roles)
}

// RolesFromContext returns the caller's roles and whether they were set.
// Callers must treat a missing set as "no role", never as "any role".
func RolesFromContext(ctx context.Context) (role.Set, bool) {
	s, ok := ctx.Value(rolesKey{}).(role.Set)

	return s, ok
}

// contextWithPeer records the verified chain found by the authenticator
// (leaf first, accepted CA last).
func contextWithPeer(ctx context.Context, chain []*x509.Certificate) context.Context {
	return context.WithValue(ctx, peerKey{}, chain)
}

// ContextWithPeerChain returns ctx carrying a verified chain (leaf first,
// accepted CA last), as the authenticator records it. It is for servers
// that verify clients by other means, and for tests.
func ContextWithPeerChain(ctx context.Context, chain []*x509.Certificate) context.Context {
	return contextWithPeer(ctx, chain)
}

// PeerCertificate returns the verified client certificate of the call, set
// by the authenticator.
func PeerCertificate(ctx context.Context) (*x509.Certificate, bool) {
	chain, ok := PeerChain(ctx)
	if !ok {
		return nil, false
	}

	return chain[0], true
}

// PeerChain returns the verified chain of the call's client certificate
// (leaf first, accepted CA last), set by the authenticator: a call that
// stays open is checked against it again over its life.
func PeerChain(ctx context.Context) ([]*x509.Certificate, bool) {
	c, _ := ctx.Value(peerKey{}).([]*x509.Certificate)

	return c, len(c) > 0 && c[0] != nil
}

// Impersonated reports whether the call's roles were taken from metadata on
// behalf of an os:impersonator peer, that is, whether the call was
// forwarded by another node.
func Impersonated(ctx context.Context) bool {
	v, _ := ctx.Value(impersonatedKey{}).(bool)

	return v
}
