package etcdstore

import "time"

// Limits and timings of the etcd token store.
const (
	// DefaultPrefix is where the records live, one key per token id.
	DefaultPrefix = "/aegis/tokens/"

	// DefaultTimeout bounds one store operation, retries included. A
	// joiner waits on it, and a control plane that lost quorum must refuse
	// quickly rather than hang: etcd answers a healthy cluster's
	// linearizable read in milliseconds.
	DefaultTimeout = 3 * time.Second

	// maxAttempts bounds the compare-and-swap retries of one change. A
	// retry happens only when another writer changed the same record in
	// between, so each is progress for someone; the bound keeps a livelock
	// from spinning until the timeout.
	maxAttempts = 1000

	// maxBatchRecords bounds the records one transaction changes. etcd
	// refuses a transaction of more than 128 compares or operations (its
	// --max-txn-ops) or of more than 1.5 MiB (--max-request-bytes); 32
	// records of the largest legal size (about 20 KiB) stay well within
	// both. More records than that are seldom changed at once: the rest
	// wait for the next transaction.
	maxBatchRecords = 32
)
