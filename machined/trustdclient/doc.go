// Package trustdclient is a node calling its control planes' trustd with
// its node certificate: a worker's revocation watch (or poll) and membership
// heartbeats share one Client, which keeps one connection (to the
// endpoint that answered last), dials from the node's address, prefers the
// control plane its identity hashes to (so workers spread evenly over the
// control planes), moves to the others in a fixed order when that one
// fails, and goes back to it once a jittered probe finds it answering.
package trustdclient
