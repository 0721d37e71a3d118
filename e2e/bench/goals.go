package bench

import (
	"fmt"
	"time"
)

// The goals the figures are measured against (issue 32's table). They are
// reported, never enforced: a run that misses one still succeeds. Each
// compares like with like, or a figure with what the machine allows (a CPU
// floor: the call's CPU time over every process, divided by the cores),
// never with a ratio no server could meet. docs/benchmarks.md says what
// limits each.
const (
	GoalTrustdVsCfsslDB          = 2.0                     // trustd rate ÷ cfssl serve with certificate database, one connection, at least
	GoalTrustdVsCfsslDBSaturated = 5.0                     // the same at each of SaturatedCallers, at least
	GoalTrustdVsCfsslSaturated   = 1.0                     // trustd rate ÷ cfssl serve without a database at GoalSaturatedCallers, at least
	GoalTrustdCPUVsBound         = 1.5                     // trustd's CPU per certificate at GoalSaturatedCallers ÷ the in-process bound's, at most
	GoalSaturatedCallers         = 32                      // the callers of the two goals above
	GoalAPIDVsFloor              = 1.15                    // median through apid ÷ through the bare proxy, one caller, at most
	GoalAPIDVsFloorParallel      = 0.9                     // rate through apid ÷ through the bare proxy, APIDWorkers callers, at least
	GoalEtcdStoreVsBbolt         = 0.8                     // limited-use token, TokenStoreCallers callers: etcd store rate ÷ bbolt store's, at least
	GoalEtcdSingleUp             = 1500 * time.Millisecond // one control plane's machined start to etcd healthy, under
	GoalEtcdClusterUp            = 6 * time.Second         // cluster create, 3 control planes + 2 workers, all voters healthy, under
	GoalJoinStormVsFloor         = 1.3                     // total of a 1000-client storm ÷ its CPU floor, at most
	GoalJoinStormFloorClients    = 1000                    //
	GoalFanOutVsFloor            = 1.2                     // fan-out median ÷ its CPU floor, at most, for 5 and 20 nodes
)

// goalFanOutNodes are the fan-outs held to GoalFanOutVsFloor.
var goalFanOutNodes = []int{5, 20}

// missing is how a goal shows a figure that was not measured.
const missing = "-"

// Goals measures the results against the goals, in report order, the
// connection flood's bounds last. A goal whose figure is missing is listed
// as not met.
func (r Results) Goals() []Goal {
	out := r.issuanceGoals()

	out = append(out, r.apidGoals()...)
	out = append(out, r.tokenStoreConcurrentGoal(), r.etcdSingleGoal(), r.etcdClusterGoal(), r.joinFloorGoal())
	out = append(out, r.fanOutGoals()...)

	return append(out, r.connFloodGoals()...)
}

// issuanceGoals: per key type, trustd against cfssl serve with its
// certificate database on one connection and at each count of callers,
// against cfssl serve without one at GoalSaturatedCallers, and trustd's CPU
// per certificate there against the bound's.
func (r Results) issuanceGoals() []Goal {
	var out []Goal

	for _, is := range r.Issuance {
		out = append(out, atLeast(is.KeyType+": trustd ÷ cfssl serve with certificate database, one connection (rate)",
			Ratio(is.TrustdOne.PerSecond(), is.CfsslDBOne.PerSecond()), GoalTrustdVsCfsslDB))

		for _, n := range SaturatedCallers {
			td, db := is.saturated("trustd", n), is.saturated(serverCfsslDB, n)
			out = append(out, atLeast(fmt.Sprintf("%s: trustd ÷ cfssl serve with certificate database, %d callers (rate)", is.KeyType, n),
				Ratio(td.PerSecond(), db.PerSecond()), GoalTrustdVsCfsslDBSaturated))
		}

		td, cf := is.saturated("trustd", GoalSaturatedCallers), is.saturated(serverCfssl, GoalSaturatedCallers)
		out = append(out,
			atLeast(fmt.Sprintf("%s: trustd ÷ cfssl serve without a database, %d callers (rate)", is.KeyType, GoalSaturatedCallers),
				Ratio(td.PerSecond(), cf.PerSecond()), GoalTrustdVsCfsslSaturated),
			atMost(fmt.Sprintf("%s: trustd server CPU per certificate ÷ in-process bound, %d callers", is.KeyType, GoalSaturatedCallers),
				Ratio(float64(td.ServerCPU), float64(is.Bound.CPU)), GoalTrustdCPUVsBound))
	}

	return out
}

// saturated is the figure of server at callers; zero if not measured.
func (is Issuance) saturated(server string, callers int) Saturated {
	for _, s := range is.Saturated {
		if s.Server == server && s.Callers == callers {
			return s
		}
	}

	return Saturated{}
}

// apidGoals hold apid to the bare transparent proxy: its median with one
// caller, its rate with the parallel callers.
func (r Results) apidGoals() []Goal {
	a := r.APID
	if a == nil {
		a = &APIDCalls{}
	}

	return []Goal{
		atMost("apid ÷ transparent proxy floor, one caller (median latency)",
			Ratio(float64(a.Via.Median), float64(a.Proxy.Median)), GoalAPIDVsFloor),
		atLeast(fmt.Sprintf("apid ÷ transparent proxy floor, %d callers (rate)", a.Workers),
			Ratio(a.ViaParallel.PerSecond(), a.ProxyParallel.PerSecond()), GoalAPIDVsFloorParallel),
	}
}

func (r Results) tokenStoreConcurrentGoal() Goal {
	var v float64
	if ts := r.TokenStores; ts != nil && len(ts.Concurrent) == 2 {
		v = Ratio(ts.Concurrent[1].PerSecond(), ts.Concurrent[0].PerSecond())
	}

	return atLeast(fmt.Sprintf("limited-use token, %d callers: etcd store ÷ bbolt store (rate)", TokenStoreCallers), v, GoalEtcdStoreVsBbolt)
}

func atLeast(name string, v, bound float64) Goal {
	g := Goal{Name: name, Target: fmt.Sprintf("≥ %.2f×", bound), Measured: missing}
	if v > 0 {
		g.Measured, g.Met, g.Margin = fmt.Sprintf("%.2f×", v), v >= bound, v/bound
	}

	return g
}

func atMost(name string, v, bound float64) Goal {
	g := Goal{Name: name, Target: fmt.Sprintf("≤ %.2f×", bound), Measured: missing}
	if v > 0 {
		g.Measured, g.Met, g.Margin = fmt.Sprintf("%.2f×", v), v <= bound, bound/v
	}

	return g
}

func under(name string, d, bound time.Duration) Goal {
	g := Goal{Name: name, Target: "< " + formatDuration(bound), Measured: missing}
	if d > 0 {
		g.Measured, g.Met, g.Margin = formatDuration(d), d < bound, float64(bound)/float64(d)
	}

	return g
}

// fanOutGoals hold each fan-out's median to its CPU floor: the CPU time
// of the call over every node's processes and the client's, spread over
// the machine's cores, is the least any schedule could take.
func (r Results) fanOutGoals() []Goal {
	var out []Goal

	for _, n := range goalFanOutNodes {
		var v float64

		for _, f := range r.FanOut {
			if f.Nodes == n && r.CPUs > 0 {
				v = Ratio(float64(f.Latency.Median), float64(f.Latency.CPU)/float64(r.CPUs))
			}
		}

		out = append(out, atMost(fmt.Sprintf("fan-out to %d nodes: median ÷ CPU floor", n), v, GoalFanOutVsFloor))
	}

	return out
}

// joinFloorGoal holds the storm of GoalJoinStormFloorClients to its CPU
// floor: the CPU time of the storm over the control plane's processes and
// the harness's clients, spread over the machine's cores, is the least any
// schedule could take; time beyond it is time nothing ran (backoff sleeps
// after refusals, waits on a serial step).
func (r Results) joinFloorGoal() Goal {
	name := fmt.Sprintf("join storm of %d: total ÷ CPU floor", GoalJoinStormFloorClients)
	if r.JoinFloor == nil || r.JoinFloor.Clients != GoalJoinStormFloorClients {
		return atMost(name, 0, GoalJoinStormVsFloor)
	}

	return atMost(name, r.JoinFloor.FloorRatio(r.CPUs), GoalJoinStormVsFloor)
}

func (r Results) etcdClusterGoal() Goal {
	name := "cluster create, 3 control planes + 2 workers, until all etcd voters are healthy"
	if r.Etcd == nil {
		return under(name, 0, GoalEtcdClusterUp)
	}

	return under(name, r.Etcd.ClusterUp, GoalEtcdClusterUp)
}

func (r Results) etcdSingleGoal() Goal {
	name := "one control plane: machined start to etcd healthy"
	if r.Etcd == nil {
		return under(name, 0, GoalEtcdSingleUp)
	}

	return under(name, r.Etcd.SingleUp, GoalEtcdSingleUp)
}
