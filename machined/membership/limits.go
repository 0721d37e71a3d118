package membership

import "time"

// Limits of membership.
const (
	// DefaultInterval is how often a node refreshes its entry: a node that
	// is gone leaves the list within AgeOutIntervals of it (half a minute),
	// and a cluster of a hundred nodes costs etcd ten small writes a second.
	DefaultInterval = 10 * time.Second
	// MinInterval and MaxInterval bound the interval a node may ask for:
	// below a second the writes would load etcd for nothing (tests use a
	// second); above five minutes a dead node would linger for a quarter
	// of an hour.
	MinInterval = time.Second
	MaxInterval = 5 * time.Minute
	// removeAttempts bounds Remove's reads when an entry changes between
	// the read and the transaction (its lease ends, or the node comes
	// back): the second read sees the change, a third covers one more.
	removeAttempts = 3
	// AgeOutIntervals is how many intervals an entry outlives its last
	// refresh: one lost heartbeat and an etcd leader election in between
	// do not drop a live node.
	AgeOutIntervals = 3
	// RefreshIntervals is how many intervals an entry's last_seen may
	// age before a heartbeat writes the entry again when nothing else of
	// it changed; in between, a heartbeat only renews the entry's lease (a
	// keep-alive etcd's leader answers without a write through raft). The
	// lease, not last_seen, ages a node out: the writes of a steady cluster
	// drop sixfold (1,000 workers on the default interval: about 17 a
	// second instead of 100), and last_seen says when the node was last
	// seen to within a minute.
	RefreshIntervals = 6
	// MaxMembers bounds the entries of the member list: a node whose entry
	// would be one more is refused (ResourceExhausted) until one leaves,
	// so that every reader sees the whole list or refuses, never a part.
	// 16,384 entries of about 200 bytes are a 3.2 MiB List reply, within
	// gRPC's 4 MiB message, and cover the 10,000 nodes Aegis is measured
	// with; readers read it in pages of scanPage.
	MaxMembers = 16384
	// scanPage bounds one page of a read of every entry (List, Follow's
	// load, and the check of a hostname without its index key): about
	// 100 KiB a page, well within a gRPC message, whatever the list's size.
	scanPage = 500
	// MaxHeartbeatSources bounds the nodes whose last heartbeat a server
	// keeps for MinHeartbeatSpacing: an address and a time each, under
	// 2 MiB in all, for every node of a cluster of the 10,000 Aegis is
	// measured with, and a control plane's share after another failed.
	// Only callers with a valid node certificate reach the table.
	MaxHeartbeatSources = 16384
	// MaxAddresses bounds the addresses of one entry: a node has a few.
	MaxAddresses = 16
	// MaxVersionLength bounds the version string ("v1.2.3-4-gabcdef-dirty").
	MaxVersionLength = 64
	// RetryInterval is the first wait after a failed heartbeat, when
	// shorter than the interval: a node whose etcd has just been
	// bootstrapped, or whose control plane has just come back, is listed
	// within a second, not an interval later. Further failures wait
	// longer, up to the interval (Until).
	RetryInterval = time.Second
	// MinHeartbeatSpacing is the least time between two heartbeats of one
	// node that trustd records: half the shortest interval, so a node on
	// MinInterval is never refused, while a node that sends in a loop
	// costs etcd two writes a second, not thousands.
	MinHeartbeatSpacing = MinInterval / 2
	// followRetryMax caps Follow's backoff while etcd cannot be read (a
	// control plane waiting for its bootstrap, or without quorum): the list
	// comes back within two seconds of etcd, as soon as the poll it
	// replaced, at one read per two seconds at worst.
	followRetryMax = 2 * time.Second
	// NamesFresh is how old the read of every entry may be that the check
	// of a hostname without its index key uses (claims.go scanClaim): one
	// read of the whole list per two seconds rather than one per node's
	// first heartbeat.
	NamesFresh = 2 * time.Second
	// CountFresh is how old the count of the entries may be that the bound
	// of MaxMembers is checked against (count.go admit): one count of the
	// whole list per two seconds rather than one per new entry.
	CountFresh = 2 * time.Second
	// HoldFor is how long a worker whose entry a control plane holds (see
	// Holder) may go without a heartbeat while the connection it came on
	// stays open: 10,000 workers send some 33 heartbeats a second instead
	// of 1,000, and each renews the check of the worker's certificate
	// against the CAs accepted now. A worker whose entry changes, or whose
	// connection closes, sends one at once.
	HoldFor = 5 * time.Minute
	// HeldInterval is the interval a held entry carries: its control plane
	// writes its last_seen again every LastSeenRefresh(HeldInterval), and
	// a reader of any version ages it out StaleAfter(HeldInterval) after
	// that, while its session lease, not last_seen, ends it.
	HeldInterval = MaxInterval
	// SessionTTL is the time to live of a control plane's session lease:
	// the entries held by a trustd that died go within it, unless their
	// workers moved meanwhile. It is the age-out of an entry on
	// DefaultInterval, so that a dead worker and a dead control plane's
	// workers leave the list as soon; a version before holds that takes a
	// held entry's lease for one of its own finds the TTL it wants, and
	// renews it rather than revoking it.
	SessionTTL = AgeOutIntervals * DefaultInterval
	// HoldSweep is how often a Store ends the holds whose deadline passed.
	HoldSweep = time.Second
	// MaxBatchOps bounds the compares and the operations of a transaction
	// that joins those of concurrent calls (batch.go): etcd's own bound
	// (--max-txn-ops, 128 by default). A worker's first entry, or one taken
	// over from a lost control plane, is two compares and two writes, so
	// one transaction carries 64 of them.
	MaxBatchOps = 128
	// MaxBatchesInFlight bounds the joined transactions of one kind under
	// way at once: one slow round of etcd (a leader being elected) holds
	// back only the calls of its batch, and up to three more batches go
	// on meanwhile, as calls of their own did before.
	MaxBatchesInFlight = 4
	// callTimeout bounds one heartbeat or one read of the list: etcd and
	// the control planes are on the cluster's own network.
	callTimeout = 5 * time.Second
	// sharedReadTimeout bounds a read of the whole list that calls share
	// (shared.go): longer than a call, since a read of 16,384 entries on a
	// loaded control plane takes seconds (33 pages), and it is made once
	// for all the calls waiting on it, each up to its own deadline.
	sharedReadTimeout = 30 * time.Second
	// copyWait bounds how long List waits for the followed copy of the
	// list to catch up with a read made now (copy.go) before it reads
	// every entry itself: a watch a moment behind catches up in a few
	// milliseconds, and one further behind is no quicker than the read.
	copyWait = time.Second
	// copyProgress is how often List asks a copy still behind for its
	// watch's progress: etcd answers a request only while every watch of
	// the stream has caught up, and drops it otherwise.
	copyProgress = 100 * time.Millisecond
)

// AgeOut is how long an entry refreshed every interval lives without a
// refresh: its lease's time to live.
func AgeOut(interval time.Duration) time.Duration { return AgeOutIntervals * interval }

// LastSeenRefresh is the age of last_seen at which a heartbeat of an
// otherwise unchanged entry writes it again.
func LastSeenRefresh(interval time.Duration) time.Duration { return RefreshIntervals * interval }

// StaleAfter is the age of last_seen past which an entry is not believed
// whatever its lease says: the longest a beating node leaves it unwritten,
// and its age-out after that.
func StaleAfter(interval time.Duration) time.Duration {
	return LastSeenRefresh(interval) + AgeOut(interval)
}
