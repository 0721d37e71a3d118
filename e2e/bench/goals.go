package bench

import (
	"fmt"
	"time"
)

// The goals the figures are measured against. They are reported, never
// enforced: a run that misses one still succeeds.
const (
	GoalTrustdVsBound    = 0.5             // trustd rate over one connection ÷ in-process bound, at least
	GoalTrustdVsCfssl    = 3.0             // trustd rate ÷ cfssl serve's, same connection mode, at least
	GoalJoinStorm        = 5 * time.Second // total of a 200-client storm, under
	GoalJoinStormClients = 200
	GoalAPIDVsDirect     = 2.0              // median through apid ÷ straight to machined, at most
	GoalFanOut20         = 3.0              // median with nodes=20 ÷ nodes=1, at most
	GoalControlPlaneUp   = 2 * time.Second  // median boot of a control plane, under
	GoalAPIDIdleRSS      = 40 << 20         // apid's resident memory at idle, under (bytes)
	GoalEtcdClusterUp    = 10 * time.Second // cluster create, 3 control planes + 2 workers, all voters healthy, under
	GoalEtcdSingleUp     = 2 * time.Second  // one control plane's start to etcd healthy, under
	GoalEtcdStoreVsBbolt = 0.8              // issuance rate with a limited-use token, etcd store ÷ bbolt store, at least
)

// missing is how a goal shows a figure that was not measured.
const missing = "-"

// Goals measures the results against the goals, in report order. A goal
// whose figure is missing is listed as not met.
func (r Results) Goals() []Goal {
	var out []Goal

	for _, is := range r.Issuance {
		out = append(out, atLeast(is.KeyType+": trustd one connection ÷ in-process bound (rate)",
			Ratio(is.TrustdOne.PerSecond(), is.Bound.PerSecond()), GoalTrustdVsBound))
	}

	for _, is := range r.Issuance {
		out = append(out,
			atLeast(is.KeyType+": trustd ÷ cfssl serve, one connection (rate)",
				Ratio(is.TrustdOne.PerSecond(), is.CfsslOne.PerSecond()), GoalTrustdVsCfssl),
			atLeast(is.KeyType+": trustd ÷ cfssl serve, new connection per call (rate)",
				Ratio(is.TrustdNew.PerSecond(), is.CfsslNew.PerSecond()), GoalTrustdVsCfssl))
	}

	return append(out, r.joinGoal(), r.apidGoal(), r.fanOutGoal(), r.bootGoal(), r.memoryGoal(), r.connFloodGoal(),
		r.etcdClusterGoal(), r.etcdSingleGoal(), r.tokenStoreGoal())
}

func (r Results) tokenStoreGoal() Goal {
	var v float64
	if ts := r.TokenStores; ts != nil {
		v = Ratio(ts.Etcd.PerSecond(), ts.Bbolt.PerSecond())
	}

	return atLeast("limited-use token: etcd store ÷ bbolt store (rate)", v, GoalEtcdStoreVsBbolt)
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

func (r Results) fanOutGoal() Goal {
	name := "fan-out: nodes=20 ÷ nodes=1 (median latency)"

	var one, twenty time.Duration

	for _, f := range r.FanOut {
		switch f.Nodes {
		case 1:
			one = f.Latency.Median
		case 20:
			twenty = f.Latency.Median
		}
	}

	return atMost(name, Ratio(float64(twenty), float64(one)), GoalFanOut20)
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
