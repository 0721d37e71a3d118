package apid

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/healthprobe"
	"github.com/aegis-os/aegis/internal/metrics"
)

// Scopes of the stream caps, as the metrics label them.
const (
	scopeNode       = "node"
	scopeIdentity   = "identity"
	scopeConnection = "connection"
)

// listenerName is apid's value of the metrics' listener label.
const listenerName = "apid"

// registerMetrics puts apid's collectors in reg (nothing for a nil reg):
// the connections and streams against their caps, and the certificates
// apid presents and accepts. The gRPC metrics and the refused handshakes
// are counted from New, before the server is made.
func (s *Server) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}

	if err := metrics.RegisterConnections(reg, s.conns.Stats, MaxConnections, MaxConnectionsPerSource); err != nil {
		return err
	}

	if err := reg.Register(newStreamCollector(s.streams)); err != nil {
		return err
	}

	return metrics.RegisterCertificates(reg, s.certificates)
}

// knownMethod tells the methods whose calls keep their name in the gRPC
// metrics: those of the method table and the health service. apid proxies
// any name a caller sends, so any other is counted as metrics.UnknownMethod.
func knownMethod(rules authz.Rules) func(string) bool {
	return func(m string) bool {
		_, ok := rules[m]

		return ok || healthprobe.IsHealth(m)
	}
}

// methodKind is a method's streaming as its descriptor says: apid serves
// every call as a stream, and the metrics label each with its own kind.
// A method apid does not know counts as unary.
func methodKind(method string) (clientStream, serverStream bool) {
	m := methodDescriptor(method)

	return m != nil && m.IsStreamingClient(), m != nil && m.IsStreamingServer()
}

// certificates are the server certificate, the impersonator certificate
// (on a node that forwards) and the accepted CAs, as the next handshake
// would use them.
func (s *Server) certificates() []metrics.Certificate {
	var out []metrics.Certificate

	if c, err := s.cert.GetCertificate(&tls.ClientHelloInfo{}); err == nil && c.Leaf != nil {
		out = append(out, metrics.Certificate{Name: "server", Cert: c.Leaf})
	}

	if s.forward != nil {
		if c, err := s.forward.GetClientCertificate(&tls.CertificateRequestInfo{}); err == nil && c.Leaf != nil {
			out = append(out, metrics.Certificate{Name: "impersonator", Cert: c.Leaf})
		}
	}

	if set := s.accepted(); set != nil {
		for _, c := range set.Certificates() {
			out = append(out, metrics.Certificate{Name: "accepted_ca", Cert: c})
		}
	}

	return out
}

// streamCollector reports the open streams against their caps.
type streamCollector struct {
	g                    *streamGuard
	open, limit, refused *prometheus.Desc
}

func newStreamCollector(g *streamGuard) streamCollector {
	return streamCollector{
		g:       g,
		open:    prometheus.NewDesc(metrics.StreamsOpen, "Calls apid holds open, counted by the nodes they reach.", nil, nil),
		limit:   prometheus.NewDesc(metrics.StreamsLimit, "apid's stream caps.", []string{metrics.LabelScope}, nil),
		refused: prometheus.NewDesc(metrics.StreamsRefused, "Calls refused over a stream cap.", []string{metrics.LabelScope}, nil),
	}
}

func (c streamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.limit
	ch <- c.refused
}

func (c streamCollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	total := c.g.total
	refused := map[string]uint64{}

	for _, scope := range []string{scopeNode, scopeIdentity, scopeConnection} {
		refused[scope] = c.g.refused[scope]
	}
	c.g.mu.Unlock()

	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(total))

	for scope, limit := range map[string]int{
		scopeNode: MaxStreams, scopeIdentity: MaxStreamsPerIdentity, scopeConnection: MaxStreamsPerConnection, "peer_node": MaxStreamsPerPeerNode,
	} {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(limit), scope)
	}

	for scope, n := range refused {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), scope)
	}
}
