package etcd

import "time"

// Limits and timings of the etcd controller.
const (
	// dialTimeout bounds the connection to one etcd endpoint: every endpoint
	// is on the cluster's own network, a slower one is as good as down.
	dialTimeout = 2 * time.Second
	// keepAlive and keepAliveTimeout find a connection to a member that a
	// partition cut off: a dropped link sends no reset. gRPC pings an idle
	// connection at most every 10 s (it raises a shorter interval to that),
	// so the timeout does most of the work: gRPC also makes it the
	// connection's TCP user timeout, and a call whose bytes stay
	// unacknowledged that long closes the connection with Unavailable,
	// which clientv3 retries on another member for reads. 2 s leaves a
	// retry inside a 3-s operation bound; TCP acknowledgements come from
	// the kernel, so a busy member does not trip it.
	keepAlive        = 10 * time.Second
	keepAliveTimeout = 2 * time.Second
	// reconnectBase and reconnectMax are the client's reconnect backoff.
	// gRPC's default starts at a second: a member that starts (or
	// restarts) just after the client's first attempt was then found a
	// second late, and that second was most of a control plane's start to
	// etcd healthy. The endpoints are the cluster's own, so trying again
	// sooner costs next to nothing.
	reconnectBase = 100 * time.Millisecond
	reconnectMax  = 2 * time.Second
	// callTimeout bounds one membership or status call, so that an API call
	// or a boot never hangs on an etcd without quorum.
	callTimeout = 5 * time.Second
	// discoverPeriod is how often, on average, a control plane that has
	// neither data nor a bootstrap looks for an existing cluster to join.
	discoverPeriod = 500 * time.Millisecond
	// memberAddTimeout bounds the addition of this node as a learner, well
	// under callTimeout: a membership change applies within milliseconds
	// here, and one proposed while another is pending is dropped unanswered.
	memberAddTimeout = time.Second
	// learnerWait bounds how long a joining control plane waits for the
	// learners added before it to start their members (awaitEarlier): one
	// starts in well under a second, and a learner that never starts
	// costs a join no more than this; learnerPoll is how often it looks.
	learnerWait = 10 * time.Second
	learnerPoll = 250 * time.Millisecond
	// promotePeriod is how often a learner asks to be promoted: etcd refuses
	// until the learner has caught up with the leader.
	promotePeriod = 500 * time.Millisecond
	// healthPeriod is how often the local member's health is checked: a
	// status and a read, cheap enough to notice a promotion or a lost
	// quorum within a second.
	healthPeriod = time.Second
	// healthTimeout bounds one health check of the local member.
	healthTimeout = 3 * time.Second
	// maxLearners lets the control planes that boot together join at once:
	// etcd refuses a new member until every voter has been connected for
	// five seconds, which one at a time would cost each join after the
	// first. Learners do not count toward quorum.
	maxLearners = 8
	// snapshotChunk is the size of one message of a streamed snapshot, well
	// under gRPC's 4 MiB message limit.
	snapshotChunk = 1 << 20
	// MaxSnapshot bounds a snapshot uploaded for recovery: etcd's own
	// default backend quota is 2 GiB, a larger snapshot is no etcd of ours.
	MaxSnapshot = 2 << 30
	// restartTimeout bounds a rolling restart of the member: the wait for
	// another member's restart, and the member's own return to health.
	// A member takes a few seconds; more means it will not come back by
	// itself and an operator must look.
	restartTimeout = 2 * time.Minute
	// restartLockTTL is how long the restart lock outlives a machined that
	// died holding it, in seconds (as etcd's leases count): the next member
	// waits no longer than that.
	restartLockTTL = 10
	// restartPoll is how often a restarted member's health is checked: the
	// member is down until the first success, and the driver of a rotation
	// waits on it.
	restartPoll = 100 * time.Millisecond
)
