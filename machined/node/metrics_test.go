package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/timesync"
)

// Each service has one state series at 1, the others at 0, and its
// restarts; up follows Info.Up.
func TestServiceMetrics(t *testing.T) {
	infos := []system.Info{
		{ID: "apid", State: system.StateRunning, Restarts: 2},
		{ID: "trustd", State: system.StateWaiting, HasHealth: true},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newServiceCollector(func() []system.Info { return infos }))

	fams := metricstest.Gather(t, reg)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.ServiceState, []string{metrics.LabelService, "apid", metrics.LabelState, "Running"}, 1},
		{metrics.ServiceState, []string{metrics.LabelService, "apid", metrics.LabelState, "Waiting"}, 0},
		{metrics.ServiceState, []string{metrics.LabelService, "trustd", metrics.LabelState, "Waiting"}, 1},
		{metrics.ServiceUp, []string{metrics.LabelService, "apid"}, 1},
		{metrics.ServiceUp, []string{metrics.LabelService, "trustd"}, 0},
		{metrics.ServiceRestarts, []string{metrics.LabelService, "apid"}, 2},
	} {
		if got := fams.Must(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	if n := len(fams[metrics.ServiceState].GetMetric()); n != 2*len(serviceStates()) {
		t.Fatalf("%d state series, want %d", n, 2*len(serviceStates()))
	}
}

// The etcd series follow the member's status: its leader, a change of
// leader seen between scrapes, its database size; a member that does not
// answer is down and knows no leader. A node without a member reports
// nothing.
func TestEtcdMetrics(t *testing.T) {
	st := etcd.Status{Name: "cp1", ID: 1, Leader: 2, RaftTerm: 3, DBSize: 4096, DBSizeInUse: 1024}
	var answer error
	present := true
	reg := prometheus.NewRegistry()
	reg.MustRegister(newEtcdCollector(func(context.Context) (etcd.Status, bool, error) {
		if answer != nil {
			return etcd.Status{Name: st.Name}, present, answer
		}

		return st, present, nil
	}))

	member := []string{metrics.LabelMember, "cp1"}
	check := func(want map[string]float64) {
		t.Helper()

		fams := metricstest.Gather(t, reg)
		for name, v := range want {
			if got := fams.Must(t, name, member...); got != v {
				t.Errorf("%s = %v, want %v", name, got, v)
			}
		}
	}

	check(map[string]float64{
		metrics.EtcdUp: 1, metrics.EtcdHasLeader: 1, metrics.EtcdIsLeader: 0, metrics.EtcdLeaderChanges: 0,
		metrics.EtcdRaftTerm: 3, metrics.EtcdDBSize: 4096, metrics.EtcdDBSizeInUse: 1024,
	})

	st.Leader, st.RaftTerm = 1, 4
	check(map[string]float64{metrics.EtcdIsLeader: 1, metrics.EtcdLeaderChanges: 1, metrics.EtcdRaftTerm: 4})

	answer = errors.New("etcd: no reply")
	check(map[string]float64{metrics.EtcdUp: 0, metrics.EtcdHasLeader: 0, metrics.EtcdLeaderChanges: 1})

	if _, ok := metricstest.Gather(t, reg)[metrics.EtcdDBSize]; ok {
		t.Error("a member that did not answer still reports its database size")
	}

	present = false
	if n := len(metricstest.Gather(t, reg)); n != 0 {
		t.Errorf("a node without a member reports %d families", n)
	}
}

// The time series follow the time service's last measurement.
func TestTimeMetrics(t *testing.T) {
	checked := time.Unix(1_800_000_000, 0)
	st, ok := timesync.Status{Synced: true, Offset: -250 * time.Millisecond, Checked: checked}, true
	reg := prometheus.NewRegistry()
	reg.MustRegister(newTimeCollector(func() (timesync.Status, bool) { return st, ok }))

	fams := metricstest.Gather(t, reg)
	for name, want := range map[string]float64{
		metrics.TimeSynced: 1, metrics.TimeOffset: -0.25, metrics.TimeLastCheck: float64(checked.Unix()),
	} {
		if got := fams.Must(t, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	ok = false
	if n := len(metricstest.Gather(t, reg)); n != 0 {
		t.Errorf("before the first boot: %d families", n)
	}
}
