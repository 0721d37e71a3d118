// Package authz decides who may call what. Roles come from the client
// certificate's Organization (authz/role); a table (Rules) maps every API
// method to the roles that may call it, and a method without a rule is
// admin-only.
//
// Three separate interceptors, unary and stream, apply it; each runs its
// check before the handler, and no service can replace the check:
//
//   - Authenticator finds the client certificate the TLS handshake verified;
//   - Injector decides the caller's roles: from that certificate, from
//     talos-role metadata when the certificate holds os:impersonator (a
//     request forwarded by another node), or, on a listener only apid can
//     reach (machined's Unix socket), from talos-role metadata alone;
//   - Authorizer checks the roles against the rules and refuses with
//     PermissionDenied, naming the method and the roles that would allow it.
//
// Nothing fails open: a call without roles, a method without a rule and a
// stream are refused like any unary call without the right role.
package authz
