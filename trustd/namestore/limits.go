package namestore

import "time"

// Limits of the names' record.
const (
	// callTimeout bounds one check or binding: etcd and the control planes
	// are on the cluster's own network, and trustd's own request timeout
	// is longer, so a cluster without quorum answers Unavailable in time.
	callTimeout = 5 * time.Second
	// bindAttempts bounds the retries of a binding whose key changed
	// between its read and its write: a renewal racing its own retry, say.
	// A binding taken by another node is refused at the first re-read.
	bindAttempts = 3
	// controlPlanesFresh is how long the control planes' names are reused
	// before etcd is asked again: every worker heartbeat checks them, and a
	// control plane that joins is known within seconds all the same.
	controlPlanesFresh = 5 * time.Second
	// leaseSlack keeps a binding's key a little past the certificate's end:
	// the binding itself ends at NotAfter, and the lease only cleans up.
	leaseSlack = 60
	// maxHolders bounds the bindings Holders reads: the member list's own
	// bound (membership.MaxMembers), one binding a node. A record beyond it
	// is an error, never a short list, so a cluster-wide procedure never
	// misses a node.
	maxHolders = 16384
	// holdersPage bounds one reply of Holders's read: about 100 KiB of
	// bindings, whatever the record's size.
	holdersPage = 500
	// followRetryMin and followRetryMax pace FollowHolders's reads again
	// after a failure: etcd not formed yet, or a watch that ended.
	followRetryMin = time.Second
	followRetryMax = 10 * time.Second
)
