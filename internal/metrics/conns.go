package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/connlimit"
)

// connCollector reports a connection limiter's table and its caps.
type connCollector struct {
	stats                    func() connlimit.Stats
	total, perSource         int
	open, limit, closedCount *prometheus.Desc
}

// RegisterConnections reports a listener's connections against its caps
// (connlimit): open now (anonymous, proven and in the handshake room
// together), the caps of the anonymous table, and the connections the limiter
// closed, by reason. Nothing happens for a nil reg.
func RegisterConnections(reg prometheus.Registerer, stats func() connlimit.Stats, total, perSource int) error {
	if reg == nil {
		return nil
	}

	return reg.Register(&connCollector{
		stats: stats, total: total, perSource: perSource,
		open:        prometheus.NewDesc(ConnectionsOpen, "Open connections of the API listener.", nil, nil),
		limit:       prometheus.NewDesc(ConnectionsLimit, "Connection caps of the API listener.", []string{LabelScope}, nil),
		closedCount: prometheus.NewDesc(ConnectionsClosed, "Connections the limiter closed, by reason.", []string{LabelReason}, nil),
	})
}

func (c *connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.limit
	ch <- c.closedCount
}

func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()

	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Open+st.Proven+st.Handshaking))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.total), "total")
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.perSource), "per_source")
	ch <- prometheus.MustNewConstMetric(c.closedCount, prometheus.CounterValue, float64(st.Refused), "refused")
	ch <- prometheus.MustNewConstMetric(c.closedCount, prometheus.CounterValue, float64(st.Evicted), "evicted")
	ch <- prometheus.MustNewConstMetric(c.closedCount, prometheus.CounterValue, float64(st.Expired), "expired")
}
