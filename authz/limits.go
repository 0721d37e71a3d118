package authz

// Limits of the authz package, in one place.
const (
	// MaxMetadataRoles bounds the talos-role values read from one call. There
	// are five roles; a longer list is malformed or hostile, and parsing it
	// whole would only cost time on every call.
	MaxMetadataRoles = 16

	// MaxRoleNameLength bounds one role name read from metadata; the longest
	// known name is 15 bytes. Longer values are logged truncated to this.
	MaxRoleNameLength = 64
)

// Limits of the caller a forwarded call names.
const (
	// MaxCallerSerialLength bounds the serial in hex: RFC 5280 serials are
	// at most 20 octets.
	MaxCallerSerialLength = 40
	// MaxCallerSubjectLength bounds the subject: the certificates Aegis
	// issues have a common name and a few roles, well under 1 KiB.
	MaxCallerSubjectLength = 1024
)
