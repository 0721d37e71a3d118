package bench

import (
	"fmt"
	"time"

	"github.com/aegis-os/aegis/certs"
)

// The goals the figures are measured against. They are reported, never
// enforced: a run that misses one still succeeds. The issuance and fan-out
// goals compare servers with each other and with what the machine allows
// (a CPU floor: the call's CPU time over every process, divided by the
// cores), never with a ratio no server could meet.
const (
	GoalTrustdVsCfssl          = 1.3              // trustd rate ÷ cfssl serve's, one connection, at least
	GoalTrustdVsCfsslSaturated = 1.5              // trustd rate ÷ cfssl serve's at each of SaturatedCallers, at least
	GoalTrustdCPUVsBound       = 2.0              // trustd's CPU per certificate, one connection ÷ the bound's, at most
	GoalJoinStorm              = time.Second      // total of a 200-client storm, under
	GoalJoinStormClients       = 200              //
	GoalJoinStormVsFloor       = 1.3              // total of a 1000-client storm ÷ its CPU floor, at most
	GoalJoinStormFloorClients  = 1000             //
	GoalAPIDVsDirect           = 2.0              // median through apid ÷ straight to machined, at most
	GoalFanOutVsFloor          = 1.2              // fan-out median ÷ its CPU floor, at most, for 5 and 20 nodes
	GoalControlPlaneUp         = 2 * time.Second  // median boot of a control plane, under
	GoalAPIDIdleRSS            = 40 << 20         // apid's resident memory at idle, under (bytes)
	GoalEtcdClusterUp          = 10 * time.Second // cluster create, 3 control planes + 2 workers, all voters healthy, under
	GoalEtcdSingleUp           = 2 * time.Second  // one control plane's start to etcd healthy, under
	GoalEtcdStoreVsBbolt       = 0.8              // issuance rate with a limited-use token, etcd store ÷ bbolt store, at least
	GoalContainerdUp           = 2 * time.Second  // median boot of a control plane on the containerd runtime, cold and warm, under
)

// goalFanOutNodes are the fan-outs held to GoalFanOutVsFloor.
var goalFanOutNodes = []int{5, 20}

// missing is how a goal shows a figure that was not measured.
const missing = "-"

// Goals measures the results against the goals, in report order. A goal
// whose figure is missing is listed as not met.
func (r Results) Goals() []Goal {
	out := r.issuanceGoals()

	out = append(out, r.joinGoal(), r.joinFloorGoal(), r.apidGoal())
	out = append(out, r.fanOutGoals()...)

	out = append(out, r.bootGoal(), r.memoryGoal())
	out = append(out, r.connFloodGoals()...)

	return append(out, r.etcdClusterGoal(), r.etcdSingleGoal(), r.tokenStoreGoal(), r.tokenStoreConcurrentGoal(), r.containerdBootGoal(true), r.containerdBootGoal(false))
}

// containerdBootGoal is the control plane's median boot on the containerd
// runtime: cold (a fresh node, importing the images) or warm (restarted).
func (r Results) containerdBootGoal(cold bool) Goal {
	name, d := "control plane up on containerd, warm: images present (median)", time.Duration(0)
	if cold {
		name = "control plane up on containerd, cold: images imported (median)"
	}

	for _, f := range r.Runtimes {
		if f.Runtime != string(certs.RuntimeContainerd) {
			continue
		}

		if d = f.Restart.Median; cold {
			d = f.Fresh.Median
		}
	}

	return under(name, d, GoalContainerdUp)
}

// issuanceGoals: per key type, trustd against cfssl serve on one
// connection and at saturation, and trustd's CPU against the bound's.
func (r Results) issuanceGoals() []Goal {
	var out []Goal

	for _, is := range r.Issuance {
		out = append(out, atLeast(is.KeyType+": trustd ÷ cfssl serve, one connection (rate)",
			Ratio(is.TrustdOne.PerSecond(), is.CfsslOne.PerSecond()), GoalTrustdVsCfssl))

		for _, n := range SaturatedCallers {
			td, cf := is.saturated("trustd", n), is.saturated("cfssl serve", n)
			out = append(out, atLeast(fmt.Sprintf("%s: trustd ÷ cfssl serve, %d callers (saturated rate)", is.KeyType, n),
				Ratio(td.PerSecond(), cf.PerSecond()), GoalTrustdVsCfsslSaturated))
		}

		out = append(out, atMost(is.KeyType+": trustd server CPU per certificate ÷ in-process bound CPU",
			Ratio(float64(is.TrustdOne.ServerCPU), float64(is.Bound.CPU)), GoalTrustdCPUVsBound))
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

func (r Results) tokenStoreGoal() Goal {
	var v float64
	if ts := r.TokenStores; ts != nil {
		v = Ratio(ts.Etcd.PerSecond(), ts.Bbolt.PerSecond())
	}

	return atLeast("limited-use token: etcd store ÷ bbolt store (rate)", v, GoalEtcdStoreVsBbolt)
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
		g.Measured, g.Met = fmt.Sprintf("%.2f×", v), v >= bound
	}

	return g
}

func atMost(name string, v, bound float64) Goal {
	g := Goal{Name: name, Target: fmt.Sprintf("≤ %.2f×", bound), Measured: missing}
	if v > 0 {
		g.Measured, g.Met = fmt.Sprintf("%.2f×", v), v <= bound
	}

	return g
}

func under(name string, d, bound time.Duration) Goal {
	g := Goal{Name: name, Target: "< " + formatDuration(bound), Measured: missing}
	if d > 0 {
		g.Measured, g.Met = formatDuration(d), d < bound
	}

	return g
}

func (r Results) joinGoal() Goal {
	name := fmt.Sprintf("join storm of %d: total", GoalJoinStormClients)
	if r.Join == nil || r.Join.Clients != GoalJoinStormClients {
		return under(name, 0, GoalJoinStorm)
	}

	return under(name, r.Join.Total(), GoalJoinStorm)
}

func (r Results) apidGoal() Goal {
	name := "apid ÷ straight to machined (median latency)"
	if r.APID == nil {
		return atMost(name, 0, GoalAPIDVsDirect)
	}

	return atMost(name, Ratio(float64(r.APID.Via.Median), float64(r.APID.Direct.Median)), GoalAPIDVsDirect)
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

func (r Results) bootGoal() Goal {
	name := "control plane up (median)"
	if r.Boot == nil {
		return under(name, 0, GoalControlPlaneUp)
	}

	return under(name, r.Boot.ControlPlane.Median, GoalControlPlaneUp)
}

func (r Results) memoryGoal() Goal {
	g := Goal{Name: "apid idle RSS (control plane)", Target: "< " + formatMiB(GoalAPIDIdleRSS), Measured: missing}

	for _, m := range r.Memory {
		if m.Process == "apid" && m.Role == RoleControlPlane && m.IdleRSS > 0 {
			g.Measured, g.Met = formatMiB(m.IdleRSS), m.IdleRSS < GoalAPIDIdleRSS
		}
	}

	return g
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
