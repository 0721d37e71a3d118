// Package authz decides who may call what: roles come from the client
// certificate (authz/role), a table maps every API method to the roles that
// may call it, and a method without a rule is admin-only.
package authz
