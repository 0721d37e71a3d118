package authz

import (
	"context"
	"crypto/x509"
	"sync/atomic"

	"github.com/aegis-os/aegis/authz/role"
)

// certFacts is what a verified client certificate says about its holder:
// its roles and its name. A connection's certificate does not change while
// the connection is open (TLS 1.3 has no renegotiation), so these are
// worked out at its first call and kept for the others. What can change
// (revocation, the accepted CAs, validity at the time of the call) is
// checked again at every call by the Authenticator's Recheck.
type certFacts struct {
	leaf *x509.Certificate
	// roles are the known roles of the Organization; unknown are the other
	// values, which grant nothing and are logged at every call.
	roles   role.Set
	unknown []string
	// rolesText is roles for the request log.
	rolesText string
	caller    Caller
}

func newCertFacts(leaf *x509.Certificate) *certFacts {
	roles, unknown := role.FromOrganization(leaf.Subject.Organization)

	return &certFacts{leaf: leaf, roles: roles, unknown: unknown, rolesText: roles.String(), caller: CallerOfCertificate(leaf)}
}

// connMemo keeps the facts of a connection's client certificate, and its
// verification as a node's (NodeCertificate).
type connMemo struct {
	facts atomic.Pointer[certFacts]
	node  atomic.Pointer[nodeVerified]
}

type connMemoKey struct{}

// ContextWithConnMemo returns ctx with room for the facts of the client
// certificate of one connection, which the Injector fills at the
// connection's first call and reads at the others. A server puts it in the
// context of each connection it accepts (a stats.Handler's TagConn), never
// in one shared by several connections. Without it, they are worked out at
// every call.
func ContextWithConnMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, connMemoKey{}, &connMemo{})
}

// factsOf returns the facts of leaf, from the connection's memo when they
// are there for this very certificate.
func factsOf(ctx context.Context, leaf *x509.Certificate) *certFacts {
	m, _ := ctx.Value(connMemoKey{}).(*connMemo)
	if m != nil {
		if f := m.facts.Load(); f != nil && f.leaf == leaf {
			return f
		}
	}

	f := newCertFacts(leaf)
	if m != nil {
		m.facts.Store(f)
	}

	return f
}
