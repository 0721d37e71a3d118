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
