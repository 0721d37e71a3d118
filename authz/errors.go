package authz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aegis-os/aegis/authz/role"
)

// ErrUnauthenticated is returned when a call on a certificate-authenticated
// listener carries no verified client certificate naming the ClientAuth
// extended key usage. The TLS handshake should have refused such a peer
// already; this is the check that does not rely on the listener being
// configured right.
var ErrUnauthenticated = errors.New("authz: no verified client certificate")

// ErrRevoked is what a Recheck returns, wrapped, for a client certificate
// on the cluster's revocation list. The caller is told so: it holds the
// certificate and learns nothing it could not, and an operator reading the
// refusal needs to know the certificate is revoked, not broken.
var ErrRevoked = errors.New("authz: the client certificate is revoked")

// ErrNoRoles is returned when a call reaches the authorizer without roles in
// its context: the role injector is missing from the chain. It is a
// configuration error, and the call is refused rather than allowed.
var ErrNoRoles = errors.New("authz: no roles in context (role injection missing from the chain)")

// DeniedError is a refusal by the rules: the method, the roles the caller
// has and the roles that would have allowed the call.
type DeniedError struct {
	Method  string
	Have    role.Set
	Allowed role.Set
}

// Error names the method, the roles that would allow it and the caller's.
func (e *DeniedError) Error() string {
	have := "no role"
	if len(e.Have) > 0 {
		have = strings.Join(e.Have.Strings(), ", ")
	}

	return fmt.Sprintf("authz: %s needs one of %s; caller has %s",
		e.Method, strings.Join(e.Allowed.Strings(), ", "), have)
}
