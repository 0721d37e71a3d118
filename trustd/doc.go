// Package trustd is the root of trust of a cluster: it signs short-lived node
// certificates for callers that present a bootstrap token, once the node's
// clock is synced. It serves securityapi.SecurityService/Certificate (the
// Talos API) over server-authenticated TLS, with the token in the "token"
// metadata key.
//
// Each request passes fixed checks in order, each with its own gRPC code: the
// caller's source must be under its failure limit (ResourceExhausted, before
// any other work); the token must authenticate (Unauthenticated); the time
// gate must be open (FailedPrecondition); the CSR must pass ca.ParseCSR and
// the token's allowed SANs (InvalidArgument); its names must be held by no
// control plane and no other node (PermissionDenied; Config.Names). Only
// then is one use of the token spent, atomically, the names bound to the
// caller's addresses, and the certificate signed under the server profile. Every decision leaves an audit record: an issuance its own, in
// Config.Audit; a refusal one in Config.Refusals, written in full when it
// is the first of its source in RefusalInterval (or an internal error),
// else counted in the source's summary at the interval's end.
//
// The server depends only on the small interfaces of Config, so that
// machined can run it with its own signer, token store, time service and
// certificate source. Token formats live in token (beside ca), the token store
// in trustd/tokenstore, the authenticator in trustd/tokenauth, the token
// management API in trustd/tokenapi, the record of names in trustd/namestore
// and the join client in client/join.
package trustd
