// Package role defines the roles a client certificate carries in its
// Organization field. It is the vocabulary shared by the certificate issuer,
// the configs and the authorization interceptors.
package role

import (
	"fmt"
	"strings"
)

// Role is one role name as it appears in a certificate's Organization.
type Role string

// The roles Aegis knows, with the names the Talos API uses.
const (
	// Admin may call every method.
	Admin Role = "os:admin"
	// Operator may read and may restart, stop, reboot and shut down.
	Operator Role = "os:operator"
	// Reader may call read-only methods.
	Reader Role = "os:reader"
	// EtcdBackup may read and take etcd snapshots.
	EtcdBackup Role = "os:etcd:backup"
	// Impersonator marks a node's own client certificate, used by apid to
	// forward a request to another node together with the caller's roles.
	Impersonator Role = "os:impersonator"
)

// All lists every known role, most privileged first.
func All() []Role { return []Role{Admin, Operator, Reader, EtcdBackup, Impersonator} }

// Known reports whether r is one of the roles Aegis knows.
func (r Role) Known() bool {
	switch r {
	case Admin, Operator, Reader, EtcdBackup, Impersonator:
		return true
	default:
		return false
	}
}

// Set is a set of known roles.
type Set map[Role]struct{}

// NewSet returns a set holding roles.
func NewSet(roles ...Role) Set {
	s := make(Set, len(roles))
	for _, r := range roles {
		s[r] = struct{}{}
	}

	return s
}

// Parse turns names into a set and refuses any unknown or duplicate name.
// It is for operator input, where a typo must not silently drop a role.
func Parse(names []string) (Set, error) {
	s := make(Set, len(names))

	for _, name := range names {
		r := Role(strings.TrimSpace(name))
		if !r.Known() {
			return nil, fmt.Errorf("role: unknown role %q (known: %s)", name, strings.Join(Strings(All()), ", "))
		}

		if s.Has(r) {
			return nil, fmt.Errorf("role: %q given twice", name)
		}

		s[r] = struct{}{}
	}

	return s, nil
}

// FromOrganization reads the roles of a verified certificate's Organization
// values. Unknown values are returned separately so the caller can log them;
// they never grant anything.
func FromOrganization(orgs []string) (Set, []string) {
	s := make(Set, len(orgs))

	var unknown []string

	for _, o := range orgs {
		if r := Role(o); r.Known() {
			s[r] = struct{}{}
		} else {
			unknown = append(unknown, o)
		}
	}

	return s, unknown
}

// Has reports whether r is in the set.
func (s Set) Has(r Role) bool {
	_, ok := s[r]

	return ok
}

// Strings returns the role names in a stable order (the order of All).
func (s Set) Strings() []string {
	out := make([]string, 0, len(s))

	for _, r := range All() {
		if s.Has(r) {
			out = append(out, string(r))
		}
	}

	return out
}

// String joins the role names with commas.
func (s Set) String() string { return strings.Join(s.Strings(), ",") }

// Strings converts roles to their names.
func Strings(roles []Role) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = string(r)
	}

	return out
}
