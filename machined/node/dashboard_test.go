package node

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// dashboardFile is the Grafana dashboard shipped for operators.
const dashboardFile = "../../deploy/grafana/aegis.json"

// exportedSeries builds the registries of a node's daemons as they are
// built when they run (machined's, apid's, trustd's, each with the gRPC
// series of its server and the runtime's of its process) and returns the
// names of every family registered in them, and the registries.
func exportedSeries(t *testing.T) (map[string]bool, []*prometheus.Registry) {
	t.Helper()

	names := map[string]bool{}
	var regs []*prometheus.Registry

	record := func() *metricstest.Recorder {
		reg := metrics.NewRegistry()
		regs = append(regs, reg)

		for _, f := range metricstest.Gather(t, reg) { // the runtime's and aegis_build_info
			names[f.GetName()] = true
		}

		return metricstest.NewRecorder(reg)
	}

	machined := record()
	clk := clock.NewFake(epoch)
	if _, err := New(Config{Machine: controlPlaneConfig(t, clk), State: t.TempDir(), BinDir: t.TempDir(), Clock: clk, Metrics: machined}); err != nil {
		t.Fatal(err)
	}

	if _, err := metrics.NewGRPC(machined, metrics.GRPCConfig{}); err != nil {
		t.Fatal(err)
	}

	if err := registerAdmission(machined, machineapi.NewAdmission(machineapi.MaxCalls)); err != nil {
		t.Fatal(err)
	}

	apid := record()
	apidtest.StartNode(t, apidtest.NewPKI(t), apidtest.NodeConfig{IP: "127.0.0.1", Metrics: apid})

	trustd := record()
	trustdtest.Start(t, trustdtest.Options{Metrics: trustd})

	for _, r := range []*metricstest.Recorder{machined, apid, trustd} {
		for _, n := range r.Names() {
			names[n] = true
		}
	}

	return names, regs
}

// promQL keywords that read as names: they are not series.
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\([^)]*\)`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promNumbers  = regexp.MustCompile(`\b[0-9][0-9a-zA-Z_.]*`)
	promNames    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
)

// seriesOf are the series names a PromQL expression reads: its
// identifiers that are neither functions (followed by a parenthesis),
// keywords, label names (grouping, matchers) nor strings.
func seriesOf(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promNumbers.ReplaceAllString(expr, " ")

	var out []string

	for _, m := range promNames.FindAllString(expr, -1) {
		name := strings.TrimSpace(m)
		if strings.HasSuffix(name, "(") || promKeywords[strings.ToLower(name)] {
			continue
		}

		out = append(out, name)
	}

	return out
}

func TestSeriesOf(t *testing.T) {
	got := seriesOf(`histogram_quantile(0.99, sum by (job, le) (rate(grpc_server_handling_seconds_bucket{grpc_code!="OK",a=~"x y"}[5m]))) / on (job) aegis_up offset 5m`)
	if want := []string{"grpc_server_handling_seconds_bucket", "aegis_up"}; !slices.Equal(got, want) {
		t.Fatalf("seriesOf = %v, want %v", got, want)
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Every series the dashboard's queries read is one the daemons export,
// and every panel but a row queries something; the series the daemons
// export pass promlint.
func TestDashboardQueriesExportedSeries(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}

	var d dashboard
	if err = json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}

	exported, regs := exportedSeries(t)
	ids := map[int]bool{}
	queried := map[string]bool{}

	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d taken by another panel", p.Title, p.ID)
		}

		ids[p.ID] = true

		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}

		for _, tg := range p.Targets {
			names := seriesOf(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: %q reads no series", p.Title, tg.Expr)
			}

			for _, n := range names {
				queried[n] = true

				if !exported[n] && !exported[histogramOf(n)] {
					t.Errorf("panel %q reads %s, which no daemon exports", p.Title, n)
				}
			}
		}
	}

	// The series are all on it.
	for _, n := range []string{
		metrics.BuildInfo, metrics.CertificateExpiry, metrics.HandshakesRefused, metrics.ClientCertificates,
		metrics.TrustdDecisions, metrics.EtcdUp, metrics.EtcdLeaderChanges, metrics.EtcdDBSize, metrics.TimeOffset, metrics.TimeSynced,
	} {
		if !queried[n] {
			t.Errorf("the dashboard has no panel of %s", n)
		}
	}

	for _, reg := range regs {
		problems, err := promlint.NewWithMetricFamilies(gatherAll(t, reg)).Lint()
		if err != nil {
			t.Fatal(err)
		}

		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "aegis_") {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		}
	}
}

// histogramOf is the histogram a _bucket, _sum or _count series belongs to.
func histogramOf(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok {
			return base
		}
	}

	return name
}

// gatherAll reads every family of reg.
func gatherAll(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}

	return fams
}
