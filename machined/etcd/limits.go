package etcd

import "time"

// Limits and timings of the etcd controller.
const (
	// dialTimeout bounds the connection to one etcd endpoint: every endpoint
	// is on the cluster's own network, a slower one is as good as down.
	dialTimeout = 2 * time.Second
	// callTimeout bounds one membership or status call, so that an API call
	// or a boot never hangs on an etcd without quorum.
	callTimeout = 5 * time.Second
	// discoverPeriod is how often a control plane that has neither data nor
	// a bootstrap looks for an existing cluster to join.
	discoverPeriod = time.Second
	// promotePeriod is how often a learner asks to be promoted: etcd refuses
	// until the learner has caught up with the leader.
	promotePeriod = 500 * time.Millisecond
	// healthTimeout bounds one health check of the local member.
	healthTimeout = 3 * time.Second
	// snapshotChunk is the size of one message of a streamed snapshot, well
	// under gRPC's 4 MiB message limit.
	snapshotChunk = 1 << 20
	// MaxSnapshot bounds a snapshot uploaded for recovery: etcd's own
	// default backend quota is 2 GiB, a larger snapshot is no etcd of ours.
	MaxSnapshot = 2 << 30
)
