package authz

// Field names of the package's log records.
const (
	// FieldMethod is the full gRPC method name.
	FieldMethod = "method"
	// FieldRoles is the caller's roles, comma-separated.
	FieldRoles = "roles"
	// FieldAllowed is the roles that would have allowed a denied call.
	FieldAllowed = "allowed"
	// FieldUnknown is role names that were ignored because nobody knows them.
	FieldUnknown = "unknown_roles"
	// FieldSubject is the client certificate's subject.
	FieldSubject = "subject"
	// FieldPeer is the caller's network address.
	FieldPeer = "peer"
	// FieldImpersonated says whether the roles were passed by another node.
	FieldImpersonated = "impersonated"
	// FieldError is an error's text.
	FieldError = "error"
)
