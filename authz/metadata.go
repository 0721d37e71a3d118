package authz

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/wire"
)

// ErrBadMetadata is returned when talos-role metadata is malformed.
var ErrBadMetadata = errors.New("authz: malformed role metadata")

// SetMetadata replaces the roles in md with roles, one value per role. An
// empty set leaves no value, which grants nothing on the other side.
func SetMetadata(md metadata.MD, roles role.Set) {
	md.Delete(wire.MetadataRole)

	if names := roles.Strings(); len(names) > 0 {
		md.Set(wire.MetadataRole, names...)
	}
}

// ParseMetadataRoles reads the roles of talos-role values. A value holds one
// role name or several separated by commas. Unknown names are returned in
// ignored and grant nothing; so is os:impersonator, which only a certificate
// can carry and which must never be passed on. More than MaxMetadataRoles
// names is an error: the input is malformed, and the call is refused.
func ParseMetadataRoles(values []string) (roles role.Set, ignored []string, err error) {
	roles = role.Set{}
	count := 0

	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}

			if count++; count > MaxMetadataRoles {
				return nil, nil, fmt.Errorf("%w: more than %d roles in %s", ErrBadMetadata, MaxMetadataRoles, wire.MetadataRole)
			}

			r := role.Role(name)
			if !r.Known() || r == role.Impersonator {
				ignored = append(ignored, truncate(name, MaxRoleNameLength))

				continue
			}

			roles[r] = struct{}{}
		}
	}

	return roles, ignored, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}

	return s[:n] + "…"
}
