package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Results are one run's figures; results.json holds them as they are.
type Results struct {
	Workers       int `json:"workers"`
	ControlPlanes int `json:"controlPlanes"`
	// Joined is how many hollow workers held a certificate after the storm.
	Joined int `json:"joined"`
	// Served is how many had a call to trustd answered in the steady
	// window: a worker that joined but is never answered is not carried.
	Served int `json:"served"`
	// Stopped says where the run stopped short, and why; empty when it ran through.
	Stopped string `json:"stopped,omitempty"`

	Storm      Storm      `json:"joinStorm"`
	Steady     Steady     `json:"steadyState"`
	Revocation Revocation `json:"revocation"`
	CLI        CLI        `json:"cli"`
	Failover   Failover   `json:"failover"`
}

// Storm is the join storm of every hollow worker at once.
type Storm struct {
	Total time.Duration `json:"totalNs"`
	// CPU is the CPU time of every control-plane process over the storm.
	CPU time.Duration `json:"cpuNs"`
	// HarnessCPU is the harness's own, whose workers make their keys,
	// CSRs and handshakes on the same cores.
	HarnessCPU time.Duration `json:"harnessCpuNs"`
	// Cores are the machine's.
	Cores int `json:"cores"`
	// Floor is the storm's CPU floor (CPUFloor).
	Floor  time.Duration `json:"floorNs"`
	Failed int           `json:"failed"`
}

// CPUFloor is a storm's CPU floor: the CPU time of every process it made
// work over the cores, the least time any schedule of the same work could
// take; zero without cores.
func CPUFloor(cpu, harness time.Duration, cores int) time.Duration {
	if cores <= 0 {
		return 0
	}

	return (cpu + harness) / time.Duration(cores)
}

// Ratio is the storm's total time over its CPU floor.
func (s Storm) Ratio() float64 { return ratio(s.Total.Seconds(), s.Floor.Seconds()) }

// Steady is the steady state over a window.
type Steady struct {
	Window time.Duration `json:"windowNs"`
	// CPU is each control-plane process's share of one core over the
	// window, keyed "cp1/trustd".
	CPU map[string]float64 `json:"cpuCores"`
	// IdleCPU is every control-plane process's share of a core, summed,
	// before any hollow worker joined: the cluster's own cost.
	IdleCPU      float64 `json:"idleCpuCores"`
	CallsPerSec  float64 `json:"trustdCallsPerSec"`
	FailedPerSec float64 `json:"failedCallsPerSec"`
	// WritesPerSec and DBSize are nil when etcd's status could not be
	// read (at the window's start or end, for the writes).
	WritesPerSec  *float64          `json:"etcdWritesPerSec,omitempty"`
	DBSize        *int64            `json:"etcdDbBytes,omitempty"`
	TrustdConns   map[string]int    `json:"trustdConnections"`
	TrustdRSS     map[string]uint64 `json:"trustdRssBytes"`
	Renewals      int64             `json:"renewals"`
	RenewalFailed int64             `json:"renewalsFailed"`
	// Causes are the most frequent causes of the failed calls.
	Causes []Cause `json:"failureCauses,omitempty"`
	// TrustdClosed is how many connections a second the control planes'
	// trustd closed, together, by the limiter's reason (refused, evicted,
	// expired).
	TrustdClosed map[string]float64 `json:"trustdClosedPerSec,omitempty"`
}

// etcdFigures says the etcd writes a second and the database's size, or
// that they were not read.
func (s Steady) etcdFigures() string {
	writes, db := "etcd writes not read", "etcd db not read"

	if s.WritesPerSec != nil {
		writes = fmt.Sprintf("%.1f etcd writes/s", *s.WritesPerSec)
	}

	if s.DBSize != nil {
		db = fmt.Sprintf("etcd db %.1f MiB", float64(*s.DBSize)/(1<<20))
	}

	return writes + ", " + db
}

// TotalCPU is the sum of every control-plane process's share of a core.
func (s Steady) TotalCPU() float64 {
	var t float64
	for _, v := range s.CPU {
		t += v
	}

	return t
}

// PerThousand is the control planes' CPU the workers add, per 1,000
// workers: the steady state less the idle cluster, in shares of a core.
func (r Results) PerThousand() float64 {
	return ratio(r.Steady.TotalCPU()-r.Steady.IdleCPU, float64(r.Joined)/1000)
}

// Revocation is how long a revocation took to reach the hollow workers.
type Revocation struct {
	// Call is how long the Revoke call took to return: the API's path
	// to etcd and back. First is when the first worker had the serial.
	Call    time.Duration `json:"callNs"`
	First   time.Duration `json:"firstNs"`
	P50     time.Duration `json:"p50Ns"`
	P99     time.Duration `json:"p99Ns"`
	P100    time.Duration `json:"p100Ns"`
	Reached int           `json:"reached"`
}

// CLI is the wall time of aegisctl's commands with every worker listed.
type CLI struct {
	Members       time.Duration `json:"getMembersNs"`
	MembersListed int           `json:"membersListed"`
	Health        time.Duration `json:"healthNs"`
	HealthErr     string        `json:"healthError,omitempty"`
}

// Failover is a control plane killed and restarted under the workers.
type Failover struct {
	// Restart is how long the control plane took to be up again.
	Restart time.Duration `json:"restartNs"`
	// Served is from the kill until every worker had a call answered again;
	// Unserved is how many had none within the harness's wait.
	Served   time.Duration `json:"servedNs"`
	Unserved int           `json:"unserved"`
	// Waited is the longest any worker waited, from the start of its
	// first call after the kill to that call's answer (or the first
	// answer of a later one): Served less the time it made no call.
	Waited time.Duration `json:"waitedNs"`
	// WaitP50 and WaitP99 are the waits half and 99 % of those workers
	// were within; Waiters is how many workers called after the kill.
	// CPU and HarnessCPU are what the control planes' processes and the
	// harness used from the kill until every worker was served; Floor
	// their CPU floor (CPUFloor), the least time that work could take.
	CPU         time.Duration `json:"cpuNs"`
	HarnessCPU  time.Duration `json:"harnessCpuNs"`
	Floor       time.Duration `json:"floorNs"`
	WaitP50     time.Duration `json:"waitP50Ns"`
	WaitP99     time.Duration `json:"waitP99Ns"`
	Waiters     int           `json:"waiters"`
	FailedCalls int64         `json:"failedCalls"`
	FailedRenew int64         `json:"failedRenewals"`
	// LostStreams counts the revocation watches that their control plane
	// had answered and then lost (the killed one's): they moved, and are
	// not failed calls.
	LostStreams int64 `json:"lostStreams"`
	// Causes are the most frequent causes of the calls that failed from
	// the kill until every worker was served, or the harness gave up.
	Causes []Cause `json:"failureCauses,omitempty"`
}

// Percentiles returns the 50th, 99th and 100th percentiles of samples
// (nearest rank); zeros when there are none.
func Percentiles(samples []time.Duration) (p50, p99, p100 time.Duration) {
	if len(samples) == 0 {
		return 0, 0, 0
	}

	s := slices.Clone(samples)
	slices.Sort(s)

	return rank(s, 50), rank(s, 99), s[len(s)-1]
}

func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i, 1)-1]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}

	return a / b
}

// Goal is one figure against the goal.
type Goal struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Bound string `json:"goal"`
	Met   bool   `json:"met"`
}

// Goals compares the figures with the scale goals (docs/scale.md).
func (r Results) Goals() []Goal {
	perK := r.PerThousand()
	maxRSS := uint64(0)

	for _, v := range r.Steady.TrustdRSS {
		maxRSS = max(maxRSS, v)
	}

	// The CPU per 1,000 workers of a window in which some were not served
	// measures a cluster doing less than its workers ask, not its cost:
	// a starved run must not meet the goal by starving.
	cpu := pct(perK)
	if r.Served < r.Joined {
		cpu += fmt.Sprintf(" (%d of %d served)", r.Served, r.Joined)
	}

	return []Goal{
		{"hollow workers served by 3 control planes", fmt.Sprint(r.Served), "10000", r.Served >= 10000},
		{"steady CPU of the control planes per 1,000 workers (less idle)", cpu, "≤ 2 % of a core",
			r.Steady.Window > 0 && r.Joined > 0 && r.Served == r.Joined && perK <= 0.02},
		{"revocation reaching 99 %", dur(r.Revocation.P99), "≤ 1s", r.Revocation.Reached > 0 && r.Revocation.P99 <= time.Second},
		{"revocation reaching 100 %", dur(r.Revocation.P100), "≤ 2s", r.Revocation.Reached > 0 && r.Revocation.Reached == r.Joined && r.Revocation.P100 <= 2*time.Second},
		{"join storm: total ÷ CPU floor", fmt.Sprintf("%.1f×", r.Storm.Ratio()), "≤ 1.3×", r.Storm.Floor > 0 && r.Storm.Ratio() <= 1.3},
		{"aegisctl get members", dur(r.CLI.Members), "< 300ms", r.CLI.Members > 0 && r.CLI.Members < 300*time.Millisecond},
		{"control plane killed: every worker served again (the longest wait)", dur(r.Failover.Waited), "< 10s, no failed renewal",
			r.Failover.Served > 0 && r.Failover.Unserved == 0 && r.Failover.Waited < 10*time.Second && r.Failover.FailedRenew == 0},
		{"trustd RSS (largest)", mib(maxRSS), "< 256 MiB", maxRSS > 0 && maxRSS < 256<<20},
	}
}

func pct(cores float64) string { return fmt.Sprintf("%.1f %%", cores*100) }
func mib(b uint64) string      { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}

	return d.Round(time.Millisecond).String()
}

// WriteTable prints the figures and the goals, met or missed.
func (r Results) WriteTable(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	f := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }

	f("hollow workers\t%d of %d joined, %d served in the window, %d control planes", r.Joined, r.Workers, r.Served, r.ControlPlanes)
	if r.Stopped != "" {
		f("stopped\t%s", r.Stopped)
	}

	f("join storm\t%s total, CPU %s control planes + %s harness over %d cores: floor %s (%.2f×), %d failed", dur(r.Storm.Total),
		dur(r.Storm.CPU), dur(r.Storm.HarnessCPU), r.Storm.Cores, dur(r.Storm.Floor), r.Storm.Ratio(), r.Storm.Failed)
	f("steady state (%s)\t%.0f trustd calls/s (%.1f failed/s), %s", dur(r.Steady.Window),
		r.Steady.CallsPerSec, r.Steady.FailedPerSec, r.Steady.etcdFigures())

	if len(r.Steady.TrustdClosed) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.Steady.TrustdClosed) {
			parts = append(parts, fmt.Sprintf("%s %.1f /s", k, r.Steady.TrustdClosed[k]))
		}

		f("  connections trustd closed\t%s", strings.Join(parts, ", "))
	}

	// The rate first: a cause is longer than any other figure's name.
	for _, c := range r.Steady.Causes {
		f("  failed %.1f /s\t%s", c.PerSec, c.Cause)
	}

	f("  CPU of every control-plane process\t%s of a core (idle cluster %s), %s per 1,000 workers",
		pct(r.Steady.TotalCPU()), pct(r.Steady.IdleCPU), pct(r.PerThousand()))

	for _, k := range sortedKeys(r.Steady.CPU) {
		f("  CPU %s\t%s of a core", k, pct(r.Steady.CPU[k]))
	}

	for _, k := range sortedKeys(r.Steady.TrustdRSS) {
		f("  %s/trustd\t%d connections, RSS %s", k, r.Steady.TrustdConns[k], mib(r.Steady.TrustdRSS[k]))
	}

	f("renewals\t%d, %d failed", r.Steady.Renewals, r.Steady.RenewalFailed)
	f("revocation reached\t%d workers: the call %s, the first %s, 50 %% %s, 99 %% %s, 100 %% %s", r.Revocation.Reached,
		dur(r.Revocation.Call), dur(r.Revocation.First), dur(r.Revocation.P50), dur(r.Revocation.P99), dur(r.Revocation.P100))
	f("aegisctl\tget members %s (%d listed), health %s %s", dur(r.CLI.Members), r.CLI.MembersListed, dur(r.CLI.Health), r.CLI.HealthErr)
	f("control plane killed\tup again in %s, every worker served in %s (%d not), the longest wait %s, %d failed calls, %d failed renewals, %d watches moved",
		dur(r.Failover.Restart), dur(r.Failover.Served), r.Failover.Unserved, dur(r.Failover.Waited), r.Failover.FailedCalls, r.Failover.FailedRenew, r.Failover.LostStreams)
	f("  waits after the kill\t%d workers called: half within %s, 99 %% within %s", r.Failover.Waiters, dur(r.Failover.WaitP50), dur(r.Failover.WaitP99))
	f("  CPU until all served\t%s control planes + %s harness over %d cores: floor %s", dur(r.Failover.CPU), dur(r.Failover.HarnessCPU),
		r.Storm.Cores, dur(r.Failover.Floor))

	for _, c := range r.Failover.Causes {
		f("  failed %.1f /s\t%s", c.PerSec, c.Cause)
	}

	f("")
	f("goal\tvalue\tgoal\t")

	for _, g := range r.Goals() {
		verdict := "missed"
		if g.Met {
			verdict = "met"
		}

		f("%s\t%s\t%s\t%s", g.Name, g.Value, g.Bound, verdict)
	}

	return w.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	return keys
}

// WriteJSON writes the results and their goals, indented.
func (r Results) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")

	return enc.Encode(struct {
		Results
		Goals []Goal `json:"goals"`
	}{r, r.Goals()})
}
