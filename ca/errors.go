package ca

import "fmt"

// Reason names the rule that a refused input broke. Callers at an API
// boundary map every Reason to one status; tests match on it.
type Reason string

// Reasons for refusing a certificate, key or request.
const (
	ReasonBadPEM         Reason = "bad PEM"
	ReasonBadCertificate Reason = "bad certificate"
	ReasonBadKey         Reason = "bad key"
	ReasonKeyMismatch    Reason = "key does not match certificate"
	ReasonNotCA          Reason = "certificate is not a CA"
	ReasonExpired        Reason = "certificate expired"
	ReasonNotYetValid    Reason = "certificate not yet valid"
	ReasonBadCSR         Reason = "bad CSR"
	ReasonCSRSignature   Reason = "CSR signature invalid"
	ReasonTooLarge       Reason = "input too large"
	ReasonKeyType        Reason = "key type not allowed"
	ReasonCARequested    Reason = "CSR asks for a CA certificate"
	ReasonRolesRequested Reason = "CSR asks for roles"
	ReasonWildcardSAN    Reason = "wildcard DNS SAN"
	ReasonEmailSAN       Reason = "e-mail SAN"
	ReasonURISAN         Reason = "URI SAN"
	ReasonBadSAN         Reason = "invalid SAN"
	ReasonTooManySANs    Reason = "too many SANs"
	ReasonBadSubject     Reason = "invalid subject"
	ReasonProfile        Reason = "unknown profile"
	ReasonRoles          Reason = "roles not allowed"
	ReasonTTL            Reason = "invalid lifetime"
)

// Error is a refusal by the ca package: the rule broken and what broke it.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "ca: " + string(e.Reason)
	}

	return "ca: " + string(e.Reason) + ": " + e.Detail
}

// Is lets errors.Is match a refusal by its Reason alone, so the sentinels
// below match any Error of the same Reason whatever its Detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)

	return ok && t.Reason == e.Reason && (t.Detail == "" || t.Detail == e.Detail)
}

func refuse(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is, one per Reason.
var (
	ErrBadPEM         = &Error{Reason: ReasonBadPEM}
	ErrBadCertificate = &Error{Reason: ReasonBadCertificate}
	ErrBadKey         = &Error{Reason: ReasonBadKey}
	ErrKeyMismatch    = &Error{Reason: ReasonKeyMismatch}
	ErrNotCA          = &Error{Reason: ReasonNotCA}
	ErrExpired        = &Error{Reason: ReasonExpired}
	ErrNotYetValid    = &Error{Reason: ReasonNotYetValid}
	ErrBadCSR         = &Error{Reason: ReasonBadCSR}
	ErrCSRSignature   = &Error{Reason: ReasonCSRSignature}
	ErrTooLarge       = &Error{Reason: ReasonTooLarge}
	ErrKeyType        = &Error{Reason: ReasonKeyType}
	ErrCARequested    = &Error{Reason: ReasonCARequested}
	ErrRolesRequested = &Error{Reason: ReasonRolesRequested}
	ErrWildcardSAN    = &Error{Reason: ReasonWildcardSAN}
	ErrEmailSAN       = &Error{Reason: ReasonEmailSAN}
	ErrURISAN         = &Error{Reason: ReasonURISAN}
	ErrBadSAN         = &Error{Reason: ReasonBadSAN}
	ErrTooManySANs    = &Error{Reason: ReasonTooManySANs}
	ErrBadSubject     = &Error{Reason: ReasonBadSubject}
	ErrProfile        = &Error{Reason: ReasonProfile}
	ErrRoles          = &Error{Reason: ReasonRoles}
	ErrTTL            = &Error{Reason: ReasonTTL}
)
