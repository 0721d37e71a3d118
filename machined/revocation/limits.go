package revocation

import (
	"time"

	"github.com/aegis-os/aegis/client/serial"
)

// Limits and timings of the revocation list.
const (
	// MaxEntries bounds the list. Every entry travels to every apid and
	// trustd of the cluster in each update of their resources and is
	// checked at every handshake; at about 60 bytes an entry, 4096 stay far
	// below gRPC's 4 MiB message. Revocation is for a few leaked client
	// certificates: a cluster that needs more should rotate its CA, which
	// withdraws every certificate at once. Entries leave when their
	// certificate expires, so the bound is on those still valid.
	MaxEntries = 4096

	// MaxReason bounds the reason recorded with a revocation, in bytes: a
	// line for the operator, not a document.
	MaxReason = 256

	// MaxSerialLength bounds a serial in hexadecimal digits, as clients
	// check it too (serial.MaxLength: RFC 5280's 20 octets).
	MaxSerialLength = serial.MaxLength

	// MaxFileSize bounds the persisted list read at start: MaxEntries
	// entries with the longest reasons fit several times over.
	MaxFileSize = 8 << 20

	// DefaultTimeout bounds one etcd operation. An operator waits on a
	// revoke, and a control plane without quorum must answer Unavailable
	// quickly rather than hang.
	DefaultTimeout = 3 * time.Second

	// PruneInterval is how often expired entries are dropped from a node's
	// list, and on a control plane from etcd. An expired certificate is
	// refused by its expiry anyway, so the pruning only bounds the size.
	PruneInterval = time.Minute

	// PollInterval is how often a worker asks a control plane's trustd for
	// the list when none serves the watch (Watcher). A unary call of a few hundred bytes per worker per second is
	// cheap against what a revocation is worth: a leaked admin certificate
	// refused on workers within about a second of the revoke.
	PollInterval = time.Second

	// WatchBackoffMin and WatchBackoffMax pace a worker's watch once every
	// control plane failed it (none reachable): doubling from a second, the
	// poll's old pace, to ten, jittered so that the workers of a cluster
	// whose control planes return do not all call at once. A stream that
	// breaks on one control plane moves to the next at once, without
	// waiting; while none answers, the worker enforces the list it has.
	WatchBackoffMin = time.Second
	WatchBackoffMax = 10 * time.Second

	// WatchMoveSpread bounds the jittered wait of a worker whose watch a
	// control plane had accepted and then lost (killed, cut off, or
	// stopping for an upgrade) before it watches the next one. Every
	// worker of that control plane loses its stream in the same instant:
	// moved at once, the 3,333 of 10,000 workers that preferred one of
	// three control planes sent the two left their handshakes in one
	// burst, which outlasted trustd's handshake deadline, failed, and was
	// made again (a hollow-node run left 2,573 workers unserved three
	// minutes after a kill). A worker moves at its first call after the
	// loss, its watch or its heartbeat (every ten seconds, at a moment of
	// its own), whichever comes first, so the moves begin at the rate of
	// the two together: with a spread as long as the heartbeat's interval,
	// twice the heartbeats' alone, falling to nothing over the interval
	// (at 10,000 workers, some 670 handshakes a second at first, where a
	// spread of five seconds begins at 1,000). Meanwhile the worker
	// enforces the list it has, and the watch resumes from its revision,
	// so nothing is missed: a revocation made in those seconds reaches it
	// that much later.
	WatchMoveSpread = 10 * time.Second

	// WatchRetry is how long a worker polls (every PollInterval) when no
	// control plane serves the watch (Unimplemented: one minor version
	// older, mid-upgrade; or ResourceExhausted: its watchers are full)
	// before it asks for a watch again. An upgrade replaces the control
	// planes within minutes; a minute of polls is what every worker did
	// before the watch.
	WatchRetry = time.Minute

	// PollTimeout bounds one poll of one control plane, so that a control
	// plane that does not answer costs a worker at most this before it asks
	// the next.
	PollTimeout = 2 * time.Second

	// MaxLineage bounds the live certificates of one family: a first
	// certificate and every certificate renewed from it, however
	// indirectly. A revocation covers a whole family at once, so the bound
	// keeps a thief who renews a leaked certificate in a loop from growing
	// what a revocation must write past what the list holds. An honest
	// client renews before its certificate expires and holds two or three
	// live ones at a time; 64 leaves room for retries and for copies of a
	// config renewed on several machines.
	MaxLineage = 64

	// maxTxnPuts bounds the entries one etcd transaction of a revocation
	// writes: etcd refuses a transaction of more than 128 operations (its
	// --max-txn-ops default).
	maxTxnPuts = 64

	// maxTxnCompares bounds the comparisons of one transaction, under
	// etcd's 128 (--max-txn-ops applies to them too); a family of
	// MaxLineage live certificates fits with room for expired ones.
	maxTxnCompares = 100

	// maxAttempts bounds how often a renewal reads the lineage again
	// because another renewal of its family changed it in between (a
	// revocation may try MaxLineage more times: each failed attempt saw one
	// more certificate of the family); renewals are rare, so running out
	// means something renews in a loop.
	maxAttempts = 8

	// followRetry is how long the follow of etcd waits before it reads the
	// list again after its watch broke (etcd restarting, quorum lost).
	followRetry = time.Second
)

// DefaultPrefix is where the entries live in etcd, one key per serial.
const DefaultPrefix = "/aegis/revocations/"

// DefaultLineagePrefix is where the links of renewals live in etcd, one key
// per renewal: PARENT/CHILD, serials as entries hold them.
const DefaultLineagePrefix = "/aegis/lineage/"
