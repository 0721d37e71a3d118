// Package trustd is the root of trust of a cluster: it signs short-lived node
// certificates for callers that present a bootstrap token, once the node's
// clock is synced. Token formats live in trustd/token.
package trustd
