package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/version"
)

// newBuildInfo is BuildInfo: always 1, the build in its labels, so that a
// query can join it to any series of the same instance.
func newBuildInfo() prometheus.Collector {
	info := version.Get()

	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: BuildInfo,
		Help: "1, labelled by the version of Aegis, of the Talos API it implements and of Go it was built with.",
		ConstLabels: prometheus.Labels{
			LabelVersion: info.Tag, LabelTalosAPI: version.TalosAPI, LabelGoVersion: info.GoVersion,
		},
	}, func() float64 { return 1 })
}
