package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/system"
)

// serviceStates are the states a service's state series is reported for.
func serviceStates() []system.State {
	return []system.State{
		system.StateInitialized, system.StatePreparing, system.StateWaiting, system.StateRunning, system.StateStopping,
		system.StateFinished, system.StateFailed, system.StateSkipped, system.StateStarting,
	}
}

// registerMetrics puts machined's collectors in reg (nothing for a nil
// reg): its services' states and restarts, the node's etcd member and
// clock, the client certificates it issues, and the certificates it
// holds. machined.sock's gRPC metrics are made with its server.
func (n *Node) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}

	for _, c := range []prometheus.Collector{
		newServiceCollector(n.services.List), newEtcdCollector(n.etcdStatus), newTimeCollector(n.timeStatus),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}

	clientCerts, err := metrics.NewClientCertificates(reg)
	if err != nil {
		return err
	}

	n.clientCerts = clientCerts

	return metrics.RegisterCertificates(reg, n.certificates)
}

// registerAdmission reports machined.sock's open calls against their
// bound (machineapi.MaxCalls). Nothing happens for a nil reg.
func registerAdmission(reg prometheus.Registerer, a *machineapi.Admission) error {
	if reg == nil {
		return nil
	}

	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metrics.MachinedCallsOpen, Help: "Calls open on machined.sock."},
		func() float64 { return float64(a.Open()) })
	limit := prometheus.NewGauge(prometheus.GaugeOpts{Name: metrics.MachinedCallsLimit, Help: "Most calls open at once on machined.sock."})
	limit.Set(machineapi.MaxCalls)

	for _, c := range []prometheus.Collector{open, limit} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}

	return nil
}

// certificates are the node's server and impersonator certificates as
// apid and trustd get them, the CAs of the current config, and on a
// control plane etcd's certificates and CA (etcd_server, etcd_peer,
// etcd_client, etcd_ca).
func (n *Node) certificates() []metrics.Certificate {
	var out []metrics.Certificate

	res, _ := n.store.Current()

	for _, c := range []struct {
		name string
		pem  []byte
	}{
		{"server", res.GetServer().GetCrt()},
		{"impersonator", res.GetImpersonator().GetCrt()},
	} {
		if len(c.pem) == 0 {
			continue
		}

		if cert, err := ca.ParseCertificate(c.pem); err == nil {
			out = append(out, metrics.Certificate{Name: c.name, Cert: cert})
		}
	}

	if set := n.config.current().AcceptedCAs(); set != nil {
		for _, c := range set.Certificates() {
			out = append(out, metrics.Certificate{Name: "accepted_ca", Cert: c})
		}
	}

	if e := n.etcd.member(); e != nil {
		for name, c := range e.Certificates() {
			out = append(out, metrics.Certificate{Name: "etcd_" + name, Cert: c})
		}
	}

	return out
}

// serviceCollector reports each service's state, whether it is up, and
// its restarts: a handful of services times nine states.
type serviceCollector struct {
	list                func() []system.Info
	state, up, restarts *prometheus.Desc
}

func newServiceCollector(list func() []system.Info) serviceCollector {
	return serviceCollector{
		list: list,
		state: prometheus.NewDesc(metrics.ServiceState, "1 for the state a service is in, 0 for the others.",
			[]string{metrics.LabelService, metrics.LabelState}, nil),
		up: prometheus.NewDesc(metrics.ServiceUp, "1 while a service is running and, if it has a health check, healthy.",
			[]string{metrics.LabelService}, nil),
		restarts: prometheus.NewDesc(metrics.ServiceRestarts, "Times a service's run ended and its restart policy started it again.",
			[]string{metrics.LabelService}, nil),
	}
}

func (c serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.up
	ch <- c.restarts
}

func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	states := serviceStates()

	for _, info := range c.list() {
		for _, st := range states {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, boolValue(info.State == st), info.ID, st.String())
		}

		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, boolValue(info.Up()), info.ID)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(info.Restarts), info.ID)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}

	return 0
}
