// Package metricstest reads series for tests: from a registry, or scraped
// from a running daemon's endpoint.
package metricstest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the series of one gather or scrape, by name.
type Families map[string]*dto.MetricFamily

// Gather reads a registry.
func Gather(tb testing.TB, g prometheus.Gatherer) Families {
	tb.Helper()

	list, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}

	out := Families{}
	for _, f := range list {
		out[f.GetName()] = f
	}

	return out
}

// Scrape reads http://addr/metrics; it also returns the size of the body.
func Scrape(ctx context.Context, addr string) (Families, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, 0, err
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()

	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err
	}

	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("scrape of %s: %s", addr, resp.Status)
	}

	parser := expfmt.NewTextParser(model.UTF8Validation)

	parsed, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("scrape of %s: %w", addr, err)
	}

	return parsed, len(body), nil
}

// Value is the value of the first series of name whose labels include
// labels (name, value, name, value, …); ok is false when there is none.
func (f Families) Value(name string, labels ...string) (float64, bool) {
	fam, ok := f[name]
	if !ok {
		return 0, false
	}

	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}

		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}

	return 0, false
}

// Must is Value that fails the test when the series is missing.
func (f Families) Must(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()

	v, ok := f.Value(name, labels...)
	if !ok {
		tb.Fatalf("no series %s%v", name, labels)
	}

	return v
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false

		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}

		if !found {
			return false
		}
	}

	return true
}
