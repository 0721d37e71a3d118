// Package trustdclient is a node calling its control planes' trustd with
// its node certificate: a worker's revocation watch (or poll) and membership
// heartbeats share one Client, which keeps a connection per endpoint,
// dials from the node's address and moves to the next endpoint when one
// fails.
package trustdclient
