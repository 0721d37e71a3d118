package authz

import "github.com/aegis-os/aegis/internal/logkey"

// Field names of the package's log records.
const (
	// FieldMethod is the full gRPC method name.
	FieldMethod = logkey.Method
	// FieldRoles is the caller's roles, comma-separated.
	FieldRoles = logkey.Roles
	// FieldAllowed is the roles that would have allowed a denied call.
	FieldAllowed = logkey.Allowed
	// FieldUnknown is role names that were ignored because nobody knows them.
	FieldUnknown = logkey.UnknownRoles
	// FieldSubject is the client certificate's subject.
	FieldSubject = logkey.Subject
	// FieldPeer is the caller's network address.
	FieldPeer = logkey.Peer
	// FieldImpersonated says whether the roles were passed by another node.
	FieldImpersonated = logkey.Impersonated
	// FieldError is an error's text.
	FieldError = logkey.Error
)
