package scale

import "time"

const (
	// ControlPlanes is the cluster's size: the three.
	ControlPlanes = 3
	// clusterTimeout bounds the cluster's creation and a control plane's
	// restart: three machined, etcd forming, on two busy cores.
	clusterTimeout = 5 * time.Minute
	// stormTimeout bounds the join storm: 10,000 joins on two cores, each
	// an ECDSA key, a CSR and a signature, with the join client's backoff.
	stormTimeout = 20 * time.Minute
	// servedTimeout bounds the wait, after a control plane was killed, for
	// every worker to have a call answered again.
	servedTimeout = 3 * time.Minute
	// revocationTimeout bounds the wait for a revocation to reach every
	// worker: the watch pushes it within milliseconds and the fallback poll
	// is once a second, so a minute says it never will.
	revocationTimeout = time.Minute
	// statusAttempts is how often etcd's status is asked before its
	// figures are left out: apid refuses a call now and then under load.
	statusAttempts = 5
	// scrapeTimeout bounds one read of a trustd's metrics.
	scrapeTimeout = 10 * time.Second
	// cliTimeout bounds each aegisctl command.
	cliTimeout = 2 * time.Minute
	// idleWindow is how long the idle cluster's CPU is measured: as long
	// as the steady state's window, of which it is taken off. Over 20 s
	// the idle figure of one machine read 5.6 % to 8.7 % of a core, a
	// spread as wide as the cost of 1,000 workers.
	idleWindow = time.Minute
	// heartbeatInterval is a worker's default, as machined's.
	heartbeatInterval = 10 * time.Second
	// filesPerWorker and filesSpare size the harness's RLIMIT_NOFILE: a
	// hollow worker keeps one connection (trustdclient) and holds another
	// for a while after it moves, renews or joins (the retired one until
	// its last call ends, its join's own); the spare is the harness's own
	// (clients, logs, /proc reads). When a worker kept a connection to
	// each control plane it had called, 10,000 workers ran out of 20,000
	// descriptors ("socket: too many open files"). A worker that lost its
	// control plane holds, for a moment, the connection lost, the one it
	// moved to, and a probe of the one it lost: with two each, the harness
	// ran out again after a kill under 10,000 (2 + 4,096 spare), where
	// machines of their own would not have. A machine whose hard limit is
	// lower (20,000 here, which root may not raise) runs 10,000 workers
	// with what it has, and the harness says so.
	filesPerWorker = 3
	filesSpare     = 4096
)
