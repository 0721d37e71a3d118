package etcd

import "testing"

// TestPlanStale: a join's plan is stale when the running members hold
// other peers than it was made with (a learner added, or one removed, as
// the member started: etcd then ends it); names published meanwhile and
// the order of the list change nothing, and a start from data or a new
// cluster is never stale.
func TestPlanStale(t *testing.T) {
	cp1 := member{id: 1, name: "cp-1", peerURLs: []string{"https://10.0.0.2:2380"}}
	cp2 := member{id: 2, peerURLs: []string{"https://10.0.0.3:2380"}, learner: true}
	cp3 := member{id: 3, peerURLs: []string{"https://10.0.0.4:2380"}, learner: true}
	cp3named := cp3
	cp3named.name = "cp-3"

	plan := joinPlan([]member{cp1, cp2, cp3}, 2, "cp-2")

	for _, tt := range []struct {
		name string
		plan startPlan
		list []member
		want bool
	}{
		{"the same members", plan, []member{cp1, cp2, cp3}, false},
		{"in another order", plan, []member{cp3, cp1, cp2}, false},
		{"a learner published its name", plan, []member{cp1, cp2, cp3named}, false},
		{"a learner added since", joinPlan([]member{cp1, cp2}, 2, "cp-2"), []member{cp1, cp2, cp3}, true},
		{"a member removed since", plan, []member{cp1, cp2}, true},
		{"from data", startPlan{state: fromData}, []member{cp1, cp2, cp3}, false},
		{"a new cluster", startPlan{state: newCluster, initial: "cp-1=https://10.0.0.2:2380"}, []member{cp1, cp2}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.plan.stale(tt.list); got != tt.want {
				t.Fatalf("stale = %v, want %v (plan peers %q)", got, tt.want, tt.plan.peers)
			}
		})
	}
}
