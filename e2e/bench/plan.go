package bench

import (
	"net/netip"
	"time"
)

// Plan is how much load a run makes. Every loop is bounded twice: by its
// count of calls and by its time budget, whichever comes first.
type Plan struct {
	// Name is the report's mode: "full" or "quick".
	Name string
	// Rounds interleave the cases of a comparison, so that a change in the
	// machine's load falls on all of them alike.
	Rounds int
	// IssueCalls is the calls per issuance case over a kept connection or
	// in-process; IssueNewConnCalls those with a new connection per call.
	IssueCalls        int
	IssueNewConnCalls int
	// SaturatedCalls is the calls per server and count of callers in the
	// saturated issuance cases (SaturatedCallers callers at once).
	SaturatedCalls int
	// BootReps is how many fresh one-node clusters (and joining workers)
	// are booted.
	BootReps int
	// ClusterWorkers join the run's control plane: 1 + ClusterWorkers
	// nodes take the apid, fan-out and join loads.
	ClusterWorkers int
	// JoinClients join at once, JoinStorms times; then JoinFloorClients,
	// JoinFloorStorms times, with the CPU time of the storm measured.
	JoinClients      int
	JoinStorms       int
	JoinFloorClients int
	JoinFloorStorms  int
	// APIDCalls is the calls per case (direct, through apid) one after the
	// other; APIDWorkers callers then share a connection for
	// APIDParallelCalls calls per case.
	APIDCalls         int
	APIDWorkers       int
	APIDParallelCalls int
	// Handshakes is the new mTLS connections made to apid.
	Handshakes int
	// FanOutNodes are the node counts compared, FanOutCalls calls each.
	FanOutNodes []int
	FanOutCalls int
	// RuntimeBootReps is how many one-node clusters are booted (and
	// restarted) on each runtime; RuntimeWorkers join the cluster of each
	// runtime that takes the Version calls (APIDCalls per case) and the
	// fan-outs to RuntimeFanOut nodes (FanOutCalls each).
	RuntimeBootReps int
	RuntimeWorkers  int
	RuntimeFanOut   []int
	// EtcdKeys are written to etcd before the snapshot that is timed.
	EtcdKeys int
	// Budget bounds each case's loop in time.
	Budget time.Duration
	// Settle is the pause before idle memory is read.
	Settle time.Duration
}

// FullPlan is the run behind docs/benchmarks.md.
var FullPlan = Plan{
	Name: "full", Rounds: 10,
	IssueCalls: 5000, IssueNewConnCalls: 2000, SaturatedCalls: 5000,
	BootReps: 10, ClusterWorkers: 19,
	JoinClients: 200, JoinStorms: 5, JoinFloorClients: 1000, JoinFloorStorms: 5,
	APIDCalls: 5000, APIDWorkers: 8, APIDParallelCalls: 50000, Handshakes: 2000,
	FanOutNodes: []int{1, 5, 20}, FanOutCalls: 500, EtcdKeys: 10000,
	RuntimeBootReps: 5, RuntimeWorkers: 4, RuntimeFanOut: []int{1, 5},
	Budget: time.Minute, Settle: 3 * time.Second,
}

// QuickPlan keeps every case and node count with fewer repetitions; the
// whole run takes well under a minute on two cores.
var QuickPlan = Plan{
	Name: "quick", Rounds: 5,
	IssueCalls: 1000, IssueNewConnCalls: 400, SaturatedCalls: 1000,
	BootReps: 3, ClusterWorkers: 19,
	JoinClients: 200, JoinStorms: 2, JoinFloorClients: 1000, JoinFloorStorms: 2,
	APIDCalls: 1000, APIDWorkers: 8, APIDParallelCalls: 5000, Handshakes: 400,
	FanOutNodes: []int{1, 5, 20}, FanOutCalls: 150, EtcdKeys: 10000,
	RuntimeBootReps: 2, RuntimeWorkers: 4, RuntimeFanOut: []int{1, 5},
	Budget: 10 * time.Second, Settle: time.Second,
}

// Where the run's servers listen: loopback addresses of 127.7.0.0/16 only,
// a block of its own for each part, on the standard ports.
var (
	// ClusterCIDR holds the run's cluster: the control plane at .2, then
	// the workers.
	ClusterCIDR = netip.MustParsePrefix("127.7.0.0/24")
	// BootCIDR holds the one-node clusters booted and timed; the worker
	// that joins each takes the address after the control plane's.
	BootCIDR = netip.MustParsePrefix("127.7.1.0/24")
	// RuntimeBootCIDR holds the one-node clusters the runtime stage boots
	// on each runtime, RuntimeLoadCIDR the clusters its calls run on.
	RuntimeBootCIDR = netip.MustParsePrefix("127.7.12.0/24")
	RuntimeLoadCIDR = netip.MustParsePrefix("127.7.13.0/24")
	// TrustdIPs are the stand-alone trustd servers, per CA key type.
	TrustdIPs = []string{"127.7.2.1", "127.7.2.2"}
	// CfsslIPs are the cfssl servers without a certificate database, per
	// CA key type; CfsslDBIPs those with one.
	CfsslIPs   = []string{"127.7.3.1", "127.7.3.2"}
	CfsslDBIPs = []string{"127.7.3.3", "127.7.3.4"}
	// JoinSources holds the join storms' clients, one address each (the
	// block's first on): a token obtains a certificate for the address it
	// calls from, as a worker joins from its own. A /22 holds the 1,000 of
	// the larger storm.
	JoinSources = netip.MustParsePrefix("127.7.16.0/22")
	// IssueSource is the address the issuance clients call from, and the
	// one name their requests carry: what a token obtains from trustd.
	IssueSource = "127.7.9.9"
)

// CfsslPort is where cfssl serve listens (its own default).
const CfsslPort = 8888

// BareProxyPort is where the bare transparent proxy listens, on the
// control plane's address, next to apid's port.
const BareProxyPort = 50100

// Time limits of the harness's waits.
const (
	// startTimeout bounds the wait for a server to accept connections.
	startTimeout = 30 * time.Second
	// clusterTimeout bounds the wait for a cluster to come up.
	clusterTimeout = 2 * time.Minute
	// stormTimeout bounds one join storm.
	stormTimeout = 2 * time.Minute
	// callTimeout bounds one call of a loop.
	callTimeout = 30 * time.Second
	// stopGrace is how long a process has after SIGTERM before SIGKILL.
	stopGrace = 15 * time.Second
)
