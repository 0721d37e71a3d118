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

// contextWithPeer records the verified client certificate found by the
// authenticator.
func contextWithPeer(ctx context.Context, leaf *x509.Certificate) context.Context {
	return context.WithValue(ctx, peerKey{}, leaf)
}

// PeerCertificate returns the verified client certificate of the call, set
// by the authenticator.
func PeerCertificate(ctx context.Context) (*x509.Certificate, bool) {
	c, ok := ctx.Value(peerKey{}).(*x509.Certificate)

	return c, ok && c != nil
}

// Impersonated reports whether the call's roles were taken from metadata on
// behalf of an os:impersonator peer, that is, whether the call was
// forwarded by another node.
func Impersonated(ctx context.Context) bool {
	v, _ := ctx.Value(impersonatedKey{}).(bool)

	return v
}
