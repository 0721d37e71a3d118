package node

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/machined/system"
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
