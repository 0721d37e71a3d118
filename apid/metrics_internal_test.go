package apid

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
)

// The stream series follow the guard: open streams up and down, refusals
// by the cap that refused them, and the caps themselves.
func TestStreamMetrics(t *testing.T) {
	gt := newGuardTest(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStreamCollector(gt.g))

	a := gt.chain(t, time.Hour)

	var releases []func()

	for range MaxStreamsPerConnection {
		_, release, err := gt.g.admit(call(t, a, 1, false), "/machine.MachineService/Logs", 1)
		if err != nil {
			t.Fatal(err)
		}

		releases = append(releases, release)
	}

	if _, _, err := gt.g.admit(call(t, a, 1, false), "/machine.MachineService/Logs", 1); err == nil {
		t.Fatal("a stream over the connection's cap was admitted")
	}

	fams := metricstest.Gather(t, reg)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.StreamsOpen, nil, MaxStreamsPerConnection},
		{metrics.StreamsRefused, []string{metrics.LabelScope, scopeConnection}, 1},
		{metrics.StreamsRefused, []string{metrics.LabelScope, scopeNode}, 0},
		{metrics.StreamsLimit, []string{metrics.LabelScope, scopeNode}, MaxStreams},
		{metrics.StreamsLimit, []string{metrics.LabelScope, scopeConnection}, MaxStreamsPerConnection},
	} {
		if got := fams.Must(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	for _, release := range releases {
		release()
	}

	if got := metricstest.Gather(t, reg).Must(t, metrics.StreamsOpen); got != 0 {
		t.Fatalf("after the releases: %s = %v", metrics.StreamsOpen, got)
	}
}

// apid proxies any method name a caller sends: only the method table's and
// the health service's keep their own label.
func TestKnownMethod(t *testing.T) {
	known := knownMethod(authz.DefaultRules())

	for method, want := range map[string]bool{
		"/machine.MachineService/Version": true,
		"/grpc.health.v1.Health/Check":    true,
		"/machine.MachineService/Nope":    false,
		"/x/" + strings.Repeat("a", 100):  false,
	} {
		if known(method) != want {
			t.Errorf("known(%q) = %v, want %v", method, !want, want)
		}
	}
}

// apid serves every call as a stream; the metrics label each method with
// its own kind.
func TestMethodKind(t *testing.T) {
	for method, want := range map[string][2]bool{
		"/machine.MachineService/Version":     {false, false},
		"/machine.MachineService/Logs":        {false, true},
		"/machine.MachineService/EtcdRecover": {true, false},
		"/nobody.Knows/This":                  {false, false},
	} {
		if c, s := methodKind(method); [2]bool{c, s} != want {
			t.Errorf("methodKind(%s) = %v, %v; want %v", method, c, s, want)
		}
	}
}
