package etcd

import "time"

// Limits and timings of the etcd controller.
const (
	// Nice is the nice value etcd's server runs at, ahead of the node's
	// other processes (in a container, its cgroup's CPU weight:
	// runner.SharesOfNice). A leader whose heartbeats wait for the CPU
	// behind trustd's handshakes and signatures loses its followers: in a
	// join storm of 10,000 hollow workers on two cores, etcd's leader
	// missed its heartbeats for 20 s ("leader is overloaded"), the
	// followers elected another, and heartbeats then failed by the
	// thousand on keep-alives that timed out. The storm never ended: 8,104
	// workers had joined when its 20 minutes ran out. etcd's tuning guide
	// likewise gives it precedence over what shares its machine (ionice,
	// for the disk). -10 weighs about nine times a process at 0 when both
	// want the CPU, and costs nothing when etcd has nothing to do.
	Nice = -10
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
	// neither data nor a bootstrap looks for an existing cluster to join:
	// a look is a connection to each other control plane, refused at once
	// while none runs etcd, and the control planes that boot together
	// find the cluster at most this far apart.
	discoverPeriod = 200 * time.Millisecond
	// memberChangeTimeout bounds the addition of this node as a learner
	// and its promotion, well under callTimeout. Raft takes one membership
	// change at a time and drops one proposed while another is pending
	// without an answer: control planes that find the cluster at the same
	// moment (all waiting for its first member to serve) propose theirs at
	// once, and all but one wait for nothing. A change commits within
	// milliseconds on the cluster's own network (a WAL sync of a quorum),
	// so the wait ends soon; asking again is safe (an addition that did
	// apply is found and taken up, a promotion that did is answered "not a
	// learner").
	memberChangeTimeout = 300 * time.Millisecond
	// learnerWait bounds how long a joining control plane waits for the
	// learners added before it to start their members (awaitEarlier): one
	// starts in well under a second, and a learner that never starts
	// costs a join no more than this. learnerPoll is how often it looks:
	// a look is a connection and a member list on the cluster's own
	// network, and a learner starts and publishes itself in about 0.1 s
	// here, so a longer period was most of the wait.
	learnerWait = 10 * time.Second
	learnerPoll = 50 * time.Millisecond
	// promoteRetry is the first wait after a refused promotion, doubled
	// after each refusal up to promotePeriod: etcd refuses until the
	// learner has caught up with the leader, which a fresh cluster's
	// learner does within a few of these, and a learner with much to
	// catch up with is not asked for more than twice a second.
	promoteRetry  = 50 * time.Millisecond
	promotePeriod = 500 * time.Millisecond
	// promoteHold bounds how long a new learner holds its promotion while
	// control planes of the config are not members yet (see
	// absentControlPlanes): well over the spread of the looks of control
	// planes that boot together (discoverPeriod) and their additions, and
	// under the five seconds a control plane added after the promotion
	// would wait. A control plane that is down costs a join this once.
	promoteHold = 2 * time.Second
	// maxReplans bounds the starts of a join planned again at once because
	// the membership changed as the member started (memberRunner.Run):
	// each is another control plane's addition, and one that keeps
	// happening is left to the restart policy's backoff.
	maxReplans = 3
	// healthPeriod is how often the local member's health is checked: a
	// status and a read, cheap enough to notice a promotion or a lost
	// quorum within a second.
	healthPeriod = time.Second
	// healthTimeout bounds one health check of the local member.
	healthTimeout = 3 * time.Second
	// maxLearners lets the control planes that boot together join at once:
	// etcd refuses a new member, a learner too, until a quorum of the
	// voters it would make has been connected for five seconds, which one
	// at a time would cost each join after the first. Learners do not
	// count toward quorum.
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
