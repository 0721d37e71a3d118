package metrics

import "github.com/prometheus/client_golang/prometheus"

// ClientCertificateCounter counts the client certificates a node was
// asked for (ClientCertificates): machined's GenerateClientConfiguration
// and the CertificateService's Renew. A nil one counts nothing.
type ClientCertificateCounter struct{ vec *prometheus.CounterVec }

// NewClientCertificates registers the counter in reg, every series at 0
// so that a rate works before the first call; a nil reg returns nil.
func NewClientCertificates(reg prometheus.Registerer) (*ClientCertificateCounter, error) {
	if reg == nil {
		return nil, nil
	}

	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ClientCertificates,
		Help: "Client certificates this node was asked for, by operation (generate, renew) and outcome (issued, refused, failed).",
	}, []string{LabelOperation, LabelOutcome})

	for _, op := range []string{OperationGenerate, OperationRenew} {
		for _, out := range []string{OutcomeIssued, OutcomeRefused, OutcomeFailed} {
			vec.WithLabelValues(op, out)
		}
	}

	if err := reg.Register(vec); err != nil {
		return nil, err
	}

	return &ClientCertificateCounter{vec: vec}, nil
}

// Count counts one call of op (OperationGenerate, OperationRenew) that
// ended with outcome (OutcomeIssued, OutcomeRefused, OutcomeFailed).
func (c *ClientCertificateCounter) Count(op, outcome string) {
	if c == nil {
		return
	}

	c.vec.WithLabelValues(op, outcome).Inc()
}
