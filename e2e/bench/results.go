package bench

import (
	"slices"
	"time"
)

// Results are the figures of one run, typed by what was measured. A nil
// part was not measured (it failed, or the run was stopped before it).
// Sections and Goals turn them into the report.
type Results struct {
	Issuance []Issuance `json:"issuance,omitempty"`
	Join     *JoinStorm `json:"join,omitempty"`
	// JoinFloor is the larger storm, measured against its CPU floor.
	JoinFloor *JoinStorm   `json:"join_floor,omitempty"`
	APID      *APIDCalls   `json:"apid,omitempty"`
	FanOut    []FanOut     `json:"fan_out,omitempty"`
	Boot      *Boot        `json:"boot,omitempty"`
	Memory    []Memory     `json:"memory,omitempty"`
	Flood     *ConnFlood   `json:"connection_flood,omitempty"`
	Streams   *StreamFlood `json:"stream_flood,omitempty"`
	Etcd      *Etcd        `json:"etcd,omitempty"`
	// TokenStores compares the etcd and bbolt token stores.
	TokenStores *TokenStores `json:"token_stores,omitempty"`
	// Runtimes compares the process and containerd runtimes, the
	// reference (process) first.
	Runtimes []RuntimeFigures `json:"runtimes,omitempty"`
	// CPUs is the machine's cores, which CPU floors divide by.
	CPUs int `json:"cpus,omitempty"`
}

// Case is one measured case of a comparison: the latencies of its calls,
// the CPU time one call cost summed over every process involved (the
// harness's own client included), and the part of it spent by the server
// under test alone. CPU times are zero where not measured.
type Case struct {
	Summary
	CPU       time.Duration `json:"cpu_per_call_ns,omitempty"`
	ServerCPU time.Duration `json:"server_cpu_per_call_ns,omitempty"`
}

// Issuance compares the ways to get a certificate signed by a CA of one key
// type, each measured with calls made one after the other.
type Issuance struct {
	KeyType string `json:"key_type"`
	// Bound is the in-process lower bound: CSR parse and signature check,
	// then x509.CreateCertificate; no network, no policy.
	Bound Case `json:"bound"`
	// Trustd and Cfssl are the servers, over one kept connection (One) and
	// with a new TLS connection per request (New); CfsslDB is cfssl serve
	// with its sqlite certificate database, recording every certificate.
	TrustdOne  Case `json:"trustd_one_connection"`
	TrustdNew  Case `json:"trustd_new_connection"`
	CfsslOne   Case `json:"cfssl_one_connection"`
	CfsslNew   Case `json:"cfssl_new_connection"`
	CfsslDBOne Case `json:"cfssl_db_one_connection"`
	CfsslDBNew Case `json:"cfssl_db_new_connection"`
	// Saturated is trustd and both cfssl servers under parallel callers on
	// kept connections, at each count of SaturatedCallers.
	Saturated []Saturated `json:"saturated,omitempty"`
}

// JoinStorm is clients that each make a key and join at the same moment.
type JoinStorm struct {
	Clients int `json:"clients"`
	// Totals holds, per storm, the time from the start until the last
	// client held its certificate.
	Totals []time.Duration `json:"totals_ns"`
	// Latency is each client's time from the start to its certificate,
	// over every storm.
	Latency Summary `json:"latency"`
	// Retries counts failed attempts the join clients retried.
	Retries int `json:"retries"`
	// CPU holds, per storm, the CPU time of every process the storm made
	// work (the control plane's and the harness's); empty if not measured.
	CPU []time.Duration `json:"cpu_ns,omitempty"`
}

// Total is the median of the storms' totals.
func (j *JoinStorm) Total() time.Duration { return Summarize(j.Totals).Median }

// Floor is the median of the storms' CPU floors: CPU time ÷ cpus, the
// least time any schedule of the work on cpus cores could take. Zero if
// not measured.
func (j *JoinStorm) Floor(cpus int) time.Duration {
	if len(j.CPU) == 0 || cpus <= 0 {
		return 0
	}

	return Summarize(j.CPU).Median / time.Duration(cpus)
}

// FloorRatio is the median over storms of each storm's total ÷ its CPU
// floor; zero if not measured.
func (j *JoinStorm) FloorRatio(cpus int) float64 {
	if len(j.CPU) != len(j.Totals) || len(j.CPU) == 0 || cpus <= 0 {
		return 0
	}

	ratios := make([]float64, len(j.CPU))
	for i, cpu := range j.CPU {
		ratios[i] = Ratio(float64(j.Totals[i]), float64(cpu)/float64(cpus))
	}

	slices.Sort(ratios)

	return ratios[(len(ratios)-1)/2]
}

// APIDCalls compares Version through apid with Version straight to
// machined's socket and through the bare transparent proxy in front of it
// (apid's floor: a second gRPC hop over mTLS, raw frames, no checks), and
// measures new mTLS connections to apid.
type APIDCalls struct {
	Direct Case `json:"direct"`
	Proxy  Case `json:"via_bare_proxy"`
	Via    Case `json:"via_apid"`
	// Workers is how many callers share the connection in the parallel
	// runs; the Parallel figures are those runs'. Their ServerCPU is the
	// hop's (machined's for the direct call), CPU every process's.
	Workers        int       `json:"parallel_workers"`
	DirectParallel Saturated `json:"direct_parallel"`
	ProxyParallel  Saturated `json:"via_bare_proxy_parallel"`
	ViaParallel    Saturated `json:"via_apid_parallel"`
	// Handshake is a new TLS 1.3 connection with a client certificate, up
	// to apid's first HTTP/2 frame.
	Handshake Case `json:"handshake"`
	// ConnRate is new connections per second, one after the other.
	ConnRate float64 `json:"connections_per_s"`
}

// FanOut is Version with `nodes` naming Nodes nodes, through one apid.
type FanOut struct {
	Nodes int `json:"nodes"`
	// Latency's server is the apid the call enters by: its CPU time is
	// the part of the work that stays on one machine when the nodes are
	// machines of their own.
	Latency Case `json:"latency"`
}

// Boot is the time from machined's start to its "node ready", over
// several boots of a fresh one-node cluster and of a worker joining it,
// and the time to create the run's larger cluster.
type Boot struct {
	ControlPlane Summary `json:"control_plane"`
	Worker       Summary `json:"worker"`
	// ClusterNodes were started at once; ClusterUp is how long it took
	// until all were up and every service healthy.
	ClusterNodes int           `json:"cluster_nodes"`
	ClusterUp    time.Duration `json:"cluster_up_ns"`
}

// Instances a Memory row names.
const (
	RoleControlPlane = "control plane"
	RoleWorker       = "worker"
)

// Memory is what one process held, read from /proc/PID/status.
type Memory struct {
	Process string `json:"process"`
	// Role says which instance: "control plane", "worker", or the
	// stand-alone server a load ran against.
	Role string `json:"role"`
	// IdleRSS and IdleHWM are VmRSS and VmHWM before the loads; LoadHWM is
	// VmHWM after them. Zero where not read. Bytes.
	IdleRSS uint64 `json:"idle_rss_bytes"`
	IdleHWM uint64 `json:"idle_hwm_bytes"`
	LoadHWM uint64 `json:"load_hwm_bytes"`
}

// RuntimeFigures are one runtime's figures, measured in the same run as the
// other's: a control plane's boot, and Version and fan-out calls on a
// cluster of Nodes nodes.
type RuntimeFigures struct {
	// Runtime is the machine.runtime: "process" or "containerd".
	Runtime string `json:"runtime"`
	// Fresh is a new one-node cluster's boot, from machined's start to
	// "node ready": on containerd, its containerd starts empty and imports
	// every image (cold). Restart is the same node started again with its
	// state kept: the images are there already (warm).
	Fresh   Summary `json:"boot_fresh"`
	Restart Summary `json:"boot_restart"`
	// Nodes is the cluster the calls ran on; zero if they did not run.
	Nodes  int      `json:"nodes,omitempty"`
	Direct Case     `json:"direct"`
	Via    Case     `json:"via_apid"`
	FanOut []FanOut `json:"fan_out,omitempty"`
}
